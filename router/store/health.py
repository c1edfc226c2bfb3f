"""What can go wrong with the local SQLite store, said plainly, and a damaged file moved aside.

SQLite's own messages hide the cause ("cannot rollback - no transaction is active" after a full
disk, "unable to open database file" for a read-only directory); `StoreError` names the kind
(damaged, unwritable, full, busy) and what to do. A damaged file is renamed, with its WAL and
shared-memory files, to `route.db.corrupt-<YYYYmmdd-HHMMSS>` so a fresh store can start and
nothing is lost that a tool could still recover.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from backends.errors import UsageError

__all__ = ["StoreError", "classify", "move_aside"]

# Primary SQLite result codes (sqlite3.h); Python exposes them as exc.sqlite_errorcode.
_CORRUPT, _NOTADB = 11, 26
_READONLY, _CANTOPEN, _PERM = 8, 14, 3
_FULL = 13
_BUSY, _LOCKED = 5, 6


class StoreError(UsageError):
    """The store cannot be used. `kind`: damaged | unwritable | full | busy | failed."""

    def __init__(self, kind: str, message: str, detail: str = ""):
        super().__init__(message)
        self.kind = kind
        self.detail = detail  # what SQLite or the OS said


# (kind, SQLite primary codes, words in the message), first match wins.
_RULES = (
    ("damaged", {_CORRUPT, _NOTADB}, ("malformed", "not a database", "quick_check")),
    ("full", {_FULL}, ("disk is full",)),
    ("unwritable", {_READONLY, _CANTOPEN, _PERM}, ("readonly", "unable to open")),
    ("busy", {_BUSY, _LOCKED}, ("locked",)),
)


def _kind(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return "full" if exc.errno == 28 else "unwritable"  # ENOSPC
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    for kind, codes, words in _RULES:
        if primary in codes or any(word in text for word in words):
            return kind
    return "failed"


_ADVICE = {
    "damaged": "the file is damaged; move it aside (route does so itself, to {path}.corrupt-<time>, the next "
               "time it writes a record) and a new one is started",
    "unwritable": "its directory is missing or not writable by this user; fix the permissions, or point "
                  "`log.path` in the config at a writable file, or turn the log off with `log: {{enabled: false}}`",
    "full": "the disk is full; free some space (the request log can be moved or deleted: it is only a log)",
    "busy": "another process holds it locked; retry when it is done",
    "failed": "SQLite could not use it",
}


def classify(exc: BaseException, path: Path) -> StoreError:
    """A StoreError saying what happened to the store at `path` and what to do."""
    kind = _kind(exc)
    detail = str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        detail = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return StoreError(kind, f"the local store {path} cannot be used ({detail}): {_ADVICE[kind].format(path=path)}.",
                      detail)


def move_aside(path: Path, expected_inode: int | None = None) -> Path | None:
    """Rename a damaged store (and its -wal and -shm files) to `<name>.corrupt-<time>`. Returns
    the new path, or None when `path` is no longer the file found damaged (another process
    moved it first, or a fresh one is already there)."""
    try:
        if expected_inode is not None and path.stat().st_ino != expected_inode:
            return None
    except FileNotFoundError:
        return None
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target
