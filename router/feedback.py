"""Feedback on routed requests, the labels `route calibrate --from-log` refits the scorer on.

Two sources, one table (`feedback`, in the request log's SQLite file):

- a user's verdict on one request, `good` or `bad` (`Router.feedback`, `route feedback`,
  `POST /v1/feedback`), keyed by the request log's id (what `route log` shows) or the request's
  trace id;
- consortium traces: when one consortium round ranked a member of the local tier against a
  hosted one, the arbiter's order is a preference between them for that prompt, recorded as
  soon as the request finishes.

`labelled_records` turns both into routing records `{"id", "prompt", "local", "hosted"}`:
a request the local tier answered well needed no hosted model (1, 1); one it answered badly
did (0, 1); a hosted answer judged bad gained nothing over local (0, 0); a hosted answer judged
good says nothing about what local would have done and is left out. Verdicts on requests whose
prompt was not logged (`log.store_content: false`) are left out too.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.errors import UsageError
from backends.types import last_user_text

if TYPE_CHECKING:
    from router.core import Router
    from router.decision import Outcome

__all__ = ["VERDICTS", "FeedbackStore", "attach_consortium_preferences", "record_feedback"]

VERDICTS = ("good", "bad")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    request TEXT NOT NULL,        -- the request log's id, or a trace id
    verdict TEXT,                 -- good | bad (user feedback)
    source TEXT NOT NULL,         -- user | consortium
    prompt TEXT,                  -- consortium preferences carry their own labels
    local REAL,
    hosted REAL
)
"""


class FeedbackStore:
    """The feedback table of one SQLite file; one connection per thread."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().execute(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def add_verdict(self, request: str | int, verdict: str) -> None:
        """Record a user's verdict on one request."""
        if verdict not in VERDICTS:
            raise UsageError(f"feedback must be `good` or `bad`, got {verdict!r}.")
        ref = str(request).strip()
        if not ref:
            raise UsageError("feedback needs a request id: the id `route log` shows, or a trace id.")
        self._conn().execute(
            "INSERT INTO feedback (ts, request, verdict, source) VALUES (?, ?, ?, 'user')", (time.time(), ref, verdict)
        )

    def add_preference(self, request: str, prompt: str, local: float, hosted: float) -> None:
        """Record a consortium's preference between a local and a hosted answer to `prompt`."""
        self._conn().execute(
            "INSERT INTO feedback (ts, request, source, prompt, local, hosted) VALUES (?, ?, 'consortium', ?, ?, ?)",
            (time.time(), request, prompt, local, hosted),
        )

    def count(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM feedback").fetchone()[0])

    def labelled_records(self, local_backends: Iterable[str],
                         hosted_backends: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Routing records from the feedback (see the module docstring), oldest first.
        `hosted_backends`: only verdicts on these count as hosted (a boundary between two tiers
        of three); None: every backend that is not local."""
        local = set(local_backends)
        hosted = None if hosted_backends is None else set(hosted_backends)
        conn = self._conn()
        has_requests = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'requests'").fetchone() is not None
        out = []
        for row in conn.execute("SELECT * FROM feedback ORDER BY id"):
            if row["source"] == "consortium":
                out.append(_record(f"c{row['id']}", row["prompt"], row["local"], row["hosted"], "consortium"))
            elif has_requests:
                out.extend(self._from_verdict(row, local, hosted))
        return [r for r in out if r["prompt"]]

    def _from_verdict(self, row: sqlite3.Row, local: set[str], hosted: set[str] | None) -> list[dict[str, Any]]:
        ref = row["request"]
        request = self._conn().execute(
            "SELECT prompt, backend FROM requests WHERE CAST(id AS TEXT) = ? OR trace_id = ? ORDER BY id DESC LIMIT 1",
            (ref, ref),
        ).fetchone()
        if request is None:
            return []
        good = row["verdict"] == "good"
        if request["backend"] in local:
            return [_record(f"f{row['id']}", request["prompt"], 1.0 if good else 0.0, 1.0, "user")]
        if hosted is not None and request["backend"] not in hosted:
            return []
        return [] if good else [_record(f"f{row['id']}", request["prompt"], 0.0, 0.0, "user")]


def _record(rid: str, prompt: str | None, local: float, hosted: float, source: str) -> dict[str, Any]:
    return {"id": rid, "prompt": prompt, "local": float(local), "hosted": float(hosted), "source": source,
            "dataset": "feedback"}  # fmt: skip


def _store_path(router: Router) -> Path:
    from router.store import default_store_path

    return Path(router.config.log.path).expanduser() if router.config.log.path else default_store_path()


def record_feedback(router: Router, request_id: str | int, verdict: str) -> None:
    """`Router.feedback`: store a verdict next to the router's request log."""
    FeedbackStore(_store_path(router)).add_verdict(request_id, verdict)


def local_backends(router_config: Any) -> set[str]:
    """The backends of the lowest tier: what "local" means for feedback labels."""
    tiers = router_config.routing.tiers
    return set(tiers[0].backends) if tiers else set()


def consortium_preferences(trace: dict[str, Any], local: set[str]) -> list[tuple[float, float]]:
    """(local, hosted) per round whose arbiter ranked a local member against a hosted one:
    (1, 0) when the best-ranked local answer came first, else (0, 1)."""
    prefs = []
    for rnd in trace.get("rounds") or ():
        ranked = _ranked_members(rnd)
        is_local = [m in local for m in ranked]
        if True in is_local and False in is_local:
            prefs.append((1.0, 0.0) if is_local[0] else (0.0, 1.0))
    return prefs


def _ranked_members(rnd: dict[str, Any]) -> list[str]:
    """The member (backend) names of one round's candidates, in the arbiter's order."""
    order = (rnd.get("arbiter") or {}).get("order") or []
    members = {f"{m['member']}#{m['sample']}": m["member"] for m in rnd.get("members") or ()}
    return [members[label] for label in order if label in members]


def attach_consortium_preferences(router: Router) -> None:
    """Record consortium preferences as requests finish (only with the request log on, and only
    where prompts are stored: a preference without its prompt teaches nothing)."""
    if not router.config.log.store_content:
        return
    local = local_backends(router.config)
    store: list[FeedbackStore] = []  # opened on the first preference, not at start-up

    def observe(outcome: Outcome) -> None:
        result = outcome.result
        trace = result.completion.metadata.get("trace") if result is not None else None
        if not isinstance(trace, dict):
            return
        prompt = last_user_text(outcome.messages)
        for lo, hi in consortium_preferences(trace, local):
            if not store:
                store.append(FeedbackStore(_store_path(router)))
            store[0].add_preference(str(trace.get("id")), prompt, lo, hi)

    router.add_request_observer(observe)
