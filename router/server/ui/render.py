"""LiveRequests as the page's JSON: one row of the requests list, and one request in full.

Every string that may carry an upstream's words (errors) or a user's (prompt, answer) passes the
router's redaction, as everywhere else. The full view is the request log's record (`route log
show`), found by the request's timings; prompt and answer appear only when the log keeps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from router.server.ui.reasons import reasons
from router.server.ui.timeline import timeline

if TYPE_CHECKING:
    from router.redaction import Redactor
    from router.server.ui.live import LiveRequest

__all__ = ["request_row", "trace_view"]


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def request_row(entry: LiveRequest, redactor: Redactor) -> dict[str, Any]:
    """The requests list's row: who, where, why, what came of it."""
    d = entry.decision
    return {
        "seq": entry.seq, "ts": entry.ts, "protocol": entry.protocol, "key": entry.key,
        "requested": d.chosen if d.forced else "auto", "backend": entry.backend, "model": entry.model,
        "tier": d.tier, "forced": d.forced, "status": entry.status, "score": _round(d.score.value if d.score else None),
        "ttft_s": _round(entry.ttft_s), "elapsed_s": _round(entry.elapsed_s),
        "total_s": entry.total_s,  # exact: with `ts`, it finds the request in the log (detail.py)
        "tokens": {"input": entry.input_tokens, "output": entry.output_tokens},
        "cost_usd": entry.cost_usd, "hosted_cost_usd": entry.hosted_cost_usd,
        "reasons": [redactor.text(line) for line in reasons(entry)],
        "error": redactor.text(entry.error) if entry.error else None,
        "degraded": [redactor.text(line) for line in entry.degraded],
        "consortium": entry.trace is not None, "trace_id": entry.trace_id, "simulated": entry.simulated,
    }


def trace_view(entry: LiveRequest) -> dict[str, Any]:
    """A consortium request's timeline, with the request it belongs to."""
    assert entry.trace is not None
    return {"seq": entry.seq, "ts": entry.ts, "degraded": list(entry.degraded), **timeline(entry.trace)}


def decision_view(entry: LiveRequest) -> dict[str, Any]:
    """The decision as `--json` and the request log show it, plus the fallbacks' messages."""
    out = entry.decision.as_dict(task=True)  # one request, looked at: what was scored and set aside too
    out["failures"] = [{"backend": b, "error": kind, "message": message} for b, kind, message in entry.failures]
    return out
