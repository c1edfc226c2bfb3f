"""One request in full, as `route log show ID` prints it: the request log's record, found by the
request's start and duration (the log numbers its rows only when it writes them), with the
decision and fallbacks from this process's memory when it still has them.

Prompt and answer come only from the log, so they appear exactly when the log keeps content
(`log.store_content`), redacted like every other string the server sends. Blocking (it reads
the log): run it off the event loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from router.server.ui.render import decision_view, request_row

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.ui.live import LiveRequest

__all__ = ["Lookup", "request_detail"]

_FLUSH_S = 2.0
_NEAR_S = 2.0  # the log's start time and ours differ by the microseconds between two observers


class Lookup:
    """What identifies a request in the log: when it began, how long it took, which backend."""

    def __init__(self, ts: float, total_s: float | None, backend: str | None):
        self.ts, self.total_s, self.backend = ts, total_s, backend

    @classmethod
    def of(cls, entry: LiveRequest) -> Lookup:
        return cls(entry.ts, entry.total_s, entry.backend)

    def matches(self, row: dict[str, Any]) -> bool:
        total = row.get("total_s")
        if self.total_s is None or total is None or abs(row["ts"] - self.ts) > _NEAR_S:
            return False
        return math.isclose(total, self.total_s, rel_tol=1e-9, abs_tol=1e-9)


def _logged(router: RouterService, lookup: Lookup) -> dict[str, Any] | None:
    log = router.view.request_log
    if log is None:
        return None
    from router.store.choice import open_log

    log.flush(_FLUSH_S)  # this process's records are written within the flush interval
    reader = open_log(router.view.loaded, check=False)
    try:
        rows = reader.recent(50, backend=lookup.backend, since_ts=lookup.ts - _NEAR_S)
    finally:
        reader.close()
    return next((row for row in rows if lookup.matches(row)), None)


def _facts(row: dict[str, Any]) -> list[list[Any]]:
    """The lines `route log show` opens with, in its order and words."""
    decision = row.get("decision") or {}
    error = f": {row.get('error_type')}: {row.get('error')}" if row.get("error") else ""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["ts"]))
    tokens = f"{_num(row.get('input_tokens'), 'd')} in, {_num(row.get('output_tokens'), 'd')} out"
    taken = f"{_num(row.get('total_s'), '.2f')} s (first token {_num(row.get('ttft_s'), '.2f')} s)"
    return [["id", row.get("id")], ["time", when], ["source", row.get("source")],
            ["asked for", _or_dash(row.get("requested"))],
            ["backend", f"{_or_dash(row.get('backend'))} ({_or_dash(row.get('model'))})"],
            ["status", row["status"] + error], ["reason", _or_dash(decision.get("reason"))], ["tokens", tokens],
            ["time taken", taken], ["cost", f"${_num(row.get('cost_usd'), '.6f')}"], ["trace", _or_dash(row.get("trace_id"))],
            ["simulated", "yes: the answer is fake" if row.get("simulated") else "no"]]


def _or_dash(value: Any) -> Any:
    return value or "-"


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _content_note(router: RouterService, row: dict[str, Any] | None) -> str | None:
    if router.view.request_log is None:
        return "not stored: the request log is off (`--no-log` or `log: {enabled: false}`)"
    if row is None:
        return "not found in the request log"
    if not router.view.request_log.store_content:
        return "not stored: log.store_content is false"
    return None


def request_detail(router: RouterService, entry: LiveRequest | None, lookup: Lookup,
                   sees: Callable[[str | None], bool] | None = None) -> dict[str, Any] | None:
    """The request in full; None when neither this process nor the log knows it (with `sees`,
    a logged request of a key it does not see is one the log does not know)."""
    row = _logged(router, lookup)
    if row is not None and sees is not None and not sees(row.get("key_name")):
        row = None
    if row is None and entry is None:
        return None
    out: dict[str, Any] = {"id": row.get("id") if row else None, "content_note": _content_note(router, row)}
    if row is not None:
        out.update(_from_log(router, row))
    if entry is not None:
        out.update(_from_memory(router, entry))
    return out


def _from_log(router: RouterService, row: dict[str, Any]) -> dict[str, Any]:
    text = router.view.redactor.text
    out: dict[str, Any] = {"facts": [[name, text(str(value))] for name, value in _facts(row)],
                           "decision": row.get("decision")}
    for name in ("prompt", "thinking", "answer"):
        value = row.get(name)
        out[name] = text(value) if isinstance(value, str) else None
    return out


def _from_memory(router: RouterService, entry: LiveRequest) -> dict[str, Any]:
    """The row as the list shows it, and the decision with the fallbacks' messages."""
    decision = decision_view(entry)
    for failure in decision["failures"]:
        failure["message"] = router.view.redactor.text(failure["message"])
    return {"row": request_row(entry, router.view.redactor), "decision": decision}
