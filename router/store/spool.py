"""The local spool: with `log.flush_interval_ms: 0` and PostgreSQL away, acknowledged records
are appended here, fsynced, before the answer goes out, and replayed in order once the database
answers. So "acknowledged means recorded" holds through an outage, and through a SIGKILL during
one: the next process to log to the same database replays what the killed one left.

Layout: one directory per database (`<spool_dir>/<hash of user@host:port/db>`, 0700); one file
per process that spooled (`<time ns>-<host>-<pid>.spool`, 0600), one JSON object per line (a
record's columns by name, so a spool survives an upgrade that adds columns). A process holds an
exclusive `flock` on its own file for its life; a file nobody holds belongs to a process that is
gone, and the first process to lock it replays it. Progress (lines written) is recorded in the
database in the same transaction as the rows (`spool_replayed`), so a replay cut short by a
crash resumes where it stopped and writes nothing twice. A file replayed to its end is deleted.

Nothing here is touched unless something is spooled: a log that never meets an outage needs no
writable local directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from router.store.files import private_dirs
from router.store.records import COLUMNS

__all__ = ["Spool", "SpoolBatch"]

_LOG = logging.getLogger("router.request_log")
_SUFFIX = ".spool"


@dataclass(frozen=True, slots=True)
class SpoolBatch:
    name: str  # the spool file's name: its key in `spool_replayed`
    rows: list[tuple]
    upto: int  # lines of the file the database holds once this batch is written


class _File:
    """One spool file, open and locked by this process."""

    def __init__(self, path: Path, handle: IO[bytes], lines: int | None = None):
        self.path = path
        self.handle = handle
        self.lines = lines  # complete lines written (own file); None: not yet counted (another's)
        self.replayed = 0  # lines the database holds (as far as this process knows)

    @property
    def name(self) -> str:
        return self.path.name

    def close(self) -> None:
        self.handle.close()  # releases the lock


class Spool:
    """The spool directory of one database, for this process."""

    def __init__(self, directory: Path):
        self.directory = directory
        self._own: _File | None = None
        self._claimed: list[_File] = []  # files of processes that are gone, oldest first

    # -- spooling (callers hold the writer's lock) -------------------------------------------

    def append(self, rows: list[tuple]) -> None:
        """Append `rows` and fsync: once this returns they survive the process. OSError when the
        directory cannot be written."""
        own = self._own or self._create()
        data = b"".join(orjson.dumps(dict(zip(COLUMNS, row))) + b"\n" for row in rows)
        os.write(own.handle.fileno(), data)
        os.fsync(own.handle.fileno())
        own.lines = (own.lines or 0) + len(rows)

    def _create(self) -> _File:
        private_dirs(self.directory)
        path = self.directory / f"{time.time_ns():020d}-{socket.gethostname()}-{os.getpid()}{_SUFFIX}"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND, 0o600)
        handle = os.fdopen(fd, "ab")
        fcntl.flock(fd, fcntl.LOCK_EX)  # new and ours: never contended
        _fsync_dir(self.directory)  # the file's name survives a crash too
        self._own = _File(path, handle, lines=0)
        return self._own

    @property
    def backlog(self) -> bool:
        """Whether anything spooled still waits for the database."""
        own = self._own
        return bool(self._claimed) or (own is not None and (own.lines or 0) > own.replayed)

    @property
    def waiting(self) -> int:
        """Lines of this process's own file not yet in the database (for messages)."""
        own = self._own
        return 0 if own is None else (own.lines or 0) - own.replayed

    # -- replaying (the writer thread) -------------------------------------------------------

    def claim_orphans(self) -> int:
        """Lock the files of processes that are gone, to replay them; how many were found."""
        if not self.directory.is_dir():
            return 0
        held = {f.name for f in self._claimed} | ({self._own.name} if self._own else set())
        found = 0
        for path in sorted(self.directory.glob(f"*{_SUFFIX}")):
            if path.name in held:
                continue
            try:
                handle = path.open("rb")
            except FileNotFoundError:  # replayed and deleted by another process meanwhile
                continue
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its process is alive (or another is replaying it)
                handle.close()
                continue
            if not path.exists():  # deleted between our open and our lock
                handle.close()
                continue
            self._claimed.append(_File(path, handle))
            found += 1
        return found

    def batches(self, replayed: dict[str, int], size: int) -> Iterator[tuple[_File, SpoolBatch]]:
        """What the database does not hold yet, oldest file first, `size` rows at a time.
        `replayed`: lines per file the database holds (read from it)."""
        for spool_file in self._files():
            spool_file.replayed = max(spool_file.replayed, replayed.get(spool_file.name, 0))
            yield from ((spool_file, b) for b in _read(spool_file, size))

    def names(self) -> list[str]:
        return [f.name for f in self._files()]

    def finish(self) -> list[str]:
        """Delete what has been replayed to its end (the caller holds the writer's lock, so
        nothing is appended meanwhile); the names of the files deleted."""
        done = [f for f in self._files() if f.lines is not None and f.replayed >= f.lines]
        for spool_file in done:
            with contextlib.suppress(FileNotFoundError):
                spool_file.path.unlink()
            spool_file.close()
        self._claimed = [f for f in self._claimed if f not in done]
        if self._own in done:
            self._own = None
        return [f.name for f in done]

    def _files(self) -> list[_File]:
        """Every file this process holds, in replay order: the claimed ones, then its own."""
        return [*self._claimed, *([self._own] if self._own else [])]

    def forked(self) -> Spool:
        """This spool as a forked child starts it: the parent's files (and locks) stay the
        parent's; the child closes its copies of their descriptors."""
        for spool_file in self._files():
            with contextlib.suppress(OSError):
                spool_file.handle.close()  # the parent's copy keeps the lock
        return Spool(self.directory)

    def close(self) -> None:
        for spool_file in self._files():
            spool_file.close()
        self._claimed, self._own = [], None


def _read(spool_file: _File, size: int) -> Iterator[SpoolBatch]:
    """The complete lines after `spool_file.replayed`, as batches; counts the file's lines."""
    rows: list[tuple] = []
    line_no = 0
    with spool_file.path.open("rb") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.endswith(b"\n"):  # being written (or cut by a crash): not acknowledged yet
                line_no -= 1
                break
            if line_no <= spool_file.replayed:
                continue
            row = _row(line, spool_file.name)
            if row is not None:
                rows.append(row)
            if len(rows) >= size:
                yield SpoolBatch(spool_file.name, rows, line_no)
                rows = []
    if spool_file.lines is None or spool_file.lines < line_no:
        spool_file.lines = line_no  # another process's file: its length is what it wrote
    if rows:
        yield SpoolBatch(spool_file.name, rows, line_no)


def _row(line: bytes, name: str) -> tuple | None:
    try:
        cells = orjson.loads(line)
        return tuple(cells.get(column) for column in COLUMNS)
    except (orjson.JSONDecodeError, AttributeError):
        _LOG.warning("route: request log: a damaged line in the spool file %s was skipped", name)
        return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
