"""Read the consortia llm-consortium has saved: the `consortium_configs` table of its database.

llm-consortium 0.8 keeps it in `consortium_logs.db` in click's app directory for
"io.datasette.llm" (`~/.config/io.datasette.llm` on Linux, `$XDG_CONFIG_HOME` honoured) -- the
directory llm uses unless `LLM_USER_PATH` moves llm's; earlier versions wrote llm's own `logs.db`.
Every such place is tried, first `LLM_USER_PATH`'s. The database is opened read-only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from backends.errors import UsageError

__all__ = ["candidates", "find_database", "saved_consortia"]

_FILES = ("consortium_logs.db", "logs.db")


def candidates() -> list[Path]:
    """Where llm-consortium's database may be, most specific first."""
    import click

    dirs = [Path(os.environ["LLM_USER_PATH"])] if os.environ.get("LLM_USER_PATH") else []
    dirs.append(Path(click.get_app_dir("io.datasette.llm")))
    return [d / f for d in dirs for f in _FILES]


def _has_table(path: Path) -> bool:
    try:
        with closing(_open(path)) as db:
            return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='consortium_configs'"
                              ).fetchone() is not None
    except sqlite3.Error:
        return False


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def find_database(explicit: str | None = None) -> Path:
    """The database to read: `explicit`, else the first candidate with saved consortia."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise UsageError(f"there is no file at {path}.")
        if not _has_table(path):
            raise UsageError(f"{path} has no `consortium_configs` table, so llm-consortium saved no consortium "
                             "there (`llm consortium save NAME ...` writes one).")
        return path
    for path in candidates():
        if path.is_file() and _has_table(path):
            return path
    looked = ", ".join(str(p) for p in candidates())
    raise UsageError(f"found no consortia saved by llm-consortium (looked in {looked}); pass --db FILE to name "
                     "its database.")


def saved_consortia(path: Path) -> dict[str, dict[str, Any]]:
    """name -> the saved config, as llm-consortium wrote it (its JSON), oldest first."""
    try:
        with closing(_open(path)) as db:
            rows = db.execute("SELECT name, config FROM consortium_configs ORDER BY created_at, name").fetchall()
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read the consortia in {path}: {exc}.") from None
    saved: dict[str, dict[str, Any]] = {}
    for name, config in rows:
        try:
            data = json.loads(config)
        except (TypeError, ValueError):
            raise UsageError(f"{path}: consortium {name!r} is not the JSON llm-consortium writes; "
                             "`llm consortium list` should show the same.") from None
        if isinstance(data, dict):
            saved[str(name)] = data
    return saved
