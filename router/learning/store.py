"""What the router learns from its traffic, in the local SQLite store: labels, weight versions,
and what shadow judging spent. All the learning package's queries are here (its tables are a
step of router/store/schema.py).

The tables live in the local SQLite file (`log.path`, else `route.db` in the user data dir),
opened as every store opens it (router/store/sqlite.py: one connection per thread, WAL, a busy
timeout, migrations), so the processes of one machine (`route serve --workers N`, the CLI) share
them; a step of router/store/schema.py creates them.

    learn_labels    one routing label per row: a prompt, the boundary it speaks to (0: between
                    the first two tiers) and the quality of the lower (`local`) and upper
                    (`hosted`) tier's answer; `ref` names where it came from, so importing
                    feedback twice never counts a label twice; `giver` the client key whose
                    verdict it is (None: the router's own judgement, or the operator's), and
                    `trusted` whether the operator stands behind it (router-made, an admin key)
    learn_quarantine  client keys whose labels no refit reads (`route learn rollback --quarantine`)
    learn_versions  each adopted set of weights: the boundary it changed, the weights file,
                    the labels it was fitted on (every label of that boundary up to `seen`)
                    and the figures it was adopted on; `heads` maps every boundary to the
                    version whose weights it uses (0: the configured weights)
    learn_state     the version in use (`current`) and whether a rollback pinned it; per
                    boundary, what its last refit found (`last:<boundary>`, JSON: kept,
                    adopted or waiting for `route learn adopt`, with its figures)
    learn_spend     what each shadow judgement cost, by UTC day
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from router.store.sqlite import SqliteDb

__all__ = ["LabelRow", "LearningStore", "NewLabel", "VersionRow", "utc_day"]


class NewLabel(NamedTuple):
    """A label to store (a plain 6-tuple is one the operator stands behind, from no client key)."""

    boundary: int
    source: str
    ref: str
    prompt: str
    local: float
    hosted: float
    giver: str | None = None
    trusted: bool = True


def utc_day(ts: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if ts is None else ts))


@dataclass(frozen=True, slots=True)
class LabelRow:
    id: int
    ts: float
    boundary: int
    source: str
    ref: str
    prompt: str
    local: float
    hosted: float
    giver: str | None = None
    trusted: bool = True

    def record(self) -> dict[str, Any]:
        """As a routing record (`policies.complexity.training`), named by its ref: the same
        label is the same record whenever and wherever it was stored."""
        return {"id": self.ref, "prompt": self.prompt, "local": self.local, "hosted": self.hosted,
                "source": self.source}  # fmt: skip


@dataclass(frozen=True, slots=True)
class VersionRow:
    id: int
    ts: float
    parent: int
    boundary: int
    weights: dict[str, Any]
    seen: int
    heads: dict[int, int]
    summary: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.id, "ts": self.ts, "parent": self.parent, "boundary": self.boundary,
                "seen": self.seen, "heads": {str(b): v for b, v in self.heads.items()}, **self.summary}  # fmt: skip


class LearningStore(SqliteDb):
    """The learning tables of one SQLite file."""

    def __init__(self, path: str | Path):
        super().__init__(Path(path).expanduser())
        self._stamp_path = str(self.path.with_name(self.path.name + ".version"))  # a str: os.stat is fastest on one
        self._stamp_seen: tuple[int, int, int] | None = None

    # -- labels ---------------------------------------------------------------------------

    def add_labels(self, labels: Iterable[tuple], ts: float | None = None) -> int:
        """Insert labels (NewLabel, or its first six fields); a ref already stored is skipped.
        Returns how many were new."""
        now = time.time() if ts is None else ts
        conn = self._conn()
        before = conn.total_changes
        conn.executemany(
            "INSERT OR IGNORE INTO learn_labels (ts, boundary, source, ref, prompt, local, hosted, giver, trusted) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(now, n.boundary, n.source, n.ref, n.prompt, float(n.local), float(n.hosted), n.giver, int(n.trusted))
             for n in (NewLabel(*label) for label in labels)],
        )
        return conn.total_changes - before

    def labels(self, boundary: int) -> list[LabelRow]:
        rows = self._conn().execute("SELECT * FROM learn_labels WHERE boundary = ? ORDER BY id", (boundary,))
        return [LabelRow(**{**dict(r), "trusted": bool(r["trusted"])}) for r in rows]

    def usable_counts(self, per_key: int) -> dict[int, int]:
        """boundary -> the labels a refit would read (router/learning/learner.py's `usable`)."""
        rows = self._conn().execute(
            "SELECT boundary, SUM(CASE WHEN trusted THEN n ELSE MIN(n, ?) END) AS usable FROM ("
            " SELECT boundary, trusted, giver, COUNT(*) AS n FROM learn_labels"
            " WHERE giver IS NULL OR giver NOT IN (SELECT giver FROM learn_quarantine)"
            " GROUP BY boundary, trusted, giver) GROUP BY boundary", (per_key,))
        return {int(r["boundary"]): int(r["usable"]) for r in rows}

    def quarantine(self, givers: Iterable[str], reason: str = "") -> None:
        """No refit reads these client keys' labels from now on, those stored and those to come."""
        self._conn().executemany("INSERT OR REPLACE INTO learn_quarantine (giver, ts, reason) VALUES (?, ?, ?)",
                                 [(g, time.time(), reason) for g in givers])

    def quarantined(self) -> set[str]:
        return {r[0] for r in self._conn().execute("SELECT giver FROM learn_quarantine")}

    def label_counts(self) -> dict[int, dict[str, int]]:
        """boundary -> source -> labels."""
        out: dict[int, dict[str, int]] = {}
        for r in self._conn().execute("SELECT boundary, source, COUNT(*) AS n FROM learn_labels GROUP BY boundary, source"):
            out.setdefault(int(r["boundary"]), {})[r["source"]] = int(r["n"])
        return out

    # -- spend ----------------------------------------------------------------------------

    def add_spend(self, usd: float, calls: int, ts: float | None = None) -> None:
        now = time.time() if ts is None else ts
        self._conn().execute("INSERT INTO learn_spend (ts, day, usd, calls) VALUES (?, ?, ?, ?)",
                             (now, utc_day(now), float(usd), int(calls)))

    def spend(self, day: str | None = None) -> tuple[float, int]:
        """(dollars, calls) spent on shadow judging on a UTC day (default today); all days for "*"."""
        where, args = ("", ()) if day == "*" else (" WHERE day = ?", (day or utc_day(),))
        row = self._conn().execute(f"SELECT COALESCE(SUM(usd), 0), COALESCE(SUM(calls), 0) FROM learn_spend{where}",
                                   args).fetchone()
        return float(row[0]), int(row[1])

    # -- versions -------------------------------------------------------------------------

    def versions(self) -> list[VersionRow]:
        return [_version(r) for r in self._conn().execute("SELECT * FROM learn_versions ORDER BY id")]

    def version(self, version: int) -> VersionRow | None:
        row = self._conn().execute("SELECT * FROM learn_versions WHERE id = ?", (version,)).fetchone()
        return None if row is None else _version(row)

    def current(self) -> tuple[int, bool]:
        """(the version in use, 0 for the configured weights; whether a rollback pinned it)."""
        rows = dict(self._conn().execute("SELECT key, value FROM learn_state").fetchall())
        return int(rows.get("current", 0)), rows.get("pinned") == "1"

    def adopt(self, expected: int, boundary: int, weights: dict[str, Any], seen: int, heads: dict[int, int],
              summary: dict[str, Any]) -> int | None:
        """Record a new version and make it current, if the version in use is still `expected`
        (another process may have adopted or rolled back meanwhile): its id, else None."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            current, pinned = self.current()
            if current != expected or pinned:
                conn.execute("ROLLBACK")
                return None
            cur = conn.execute(
                "INSERT INTO learn_versions (ts, parent, boundary, weights, seen, heads, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time.time(), expected, boundary, json.dumps(weights), seen, "{}", json.dumps(summary)),
            )
            version = int(cur.lastrowid or 0)
            conn.execute("UPDATE learn_versions SET heads = ? WHERE id = ?",
                         (json.dumps({str(b): v for b, v in {**heads, boundary: version}.items()}), version))
            self._set(conn, current=str(version), **{f"refits:{boundary}": "0"})
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._stamp()
        return version

    def claim_refit(self, boundary: int, labels: int, every: int) -> int:
        """When `boundary` has `every` labels more than at its last refit: note it, so one
        process of the machine refits, and return which refit this is since the boundary's
        last adoption (1, 2, ...); 0 when another process claimed it, or it is not due."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            state = dict(conn.execute("SELECT key, value FROM learn_state WHERE key IN (?, ?)",
                                      (f"refit:{boundary}", f"refits:{boundary}")).fetchall())
            attempt = 0
            if labels - int(state.get(f"refit:{boundary}", 0)) >= every:
                attempt = int(state.get(f"refits:{boundary}", 0)) + 1
                self._set(conn, **{f"refit:{boundary}": str(labels), f"refits:{boundary}": str(attempt)})
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return attempt

    def set_current(self, version: int, *, pinned: bool) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._set(conn, current=str(version), pinned="1" if pinned else "0")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._stamp()

    def note_refit(self, boundary: int, record: dict[str, Any]) -> None:
        """What the last refit of `boundary` found (replacing the one before)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._set(conn, **{f"last:{boundary}": json.dumps(record)})
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def refits(self) -> dict[int, dict[str, Any]]:
        """boundary -> what its last refit found (`note_refit`)."""
        rows = self._conn().execute("SELECT key, value FROM learn_state WHERE key LIKE 'last:%'")
        return {int(r[0].split(":", 1)[1]): json.loads(r[1]) for r in rows}

    # -- the version in use, seen from every process of the machine --------------------------

    def _stamp(self) -> None:
        """Touch the stamp file beside the database: a process deciding requests compares its
        change time (one stat, no query) before each decision (`changed`)."""
        # a new file each time (written, then renamed over the old): a new inode, so a reader
        # sees the change even when two stamps fall in one tick of the file system's clock
        tmp = f"{self._stamp_path}.{os.getpid()}.{threading.get_ident()}"
        try:
            Path(tmp).write_text(str(time.time_ns()), encoding="ascii")
            os.replace(tmp, self._stamp_path)
        except OSError:  # a read-only directory: processes find the version at their next refresh
            pass

    def changed(self) -> bool:
        """Whether the version in use may have changed (an adoption or a rollback by any process
        of this machine) since the last call: one stat of the stamp file."""
        try:
            st = os.stat(self._stamp_path)
            seen = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            seen = None
        last, self._stamp_seen = self._stamp_seen, seen
        return seen != last

    @staticmethod
    def _set(conn: sqlite3.Connection, **values: str) -> None:
        conn.executemany("INSERT INTO learn_state (key, value) VALUES (?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value", list(values.items()))

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _version(row: sqlite3.Row) -> VersionRow:
    return VersionRow(
        id=int(row["id"]), ts=float(row["ts"]), parent=int(row["parent"]), boundary=int(row["boundary"]),
        weights=json.loads(row["weights"]), seen=int(row["seen"]),
        heads={int(b): int(v) for b, v in json.loads(row["heads"]).items()}, summary=json.loads(row["summary"]),
    )  # fmt: skip
