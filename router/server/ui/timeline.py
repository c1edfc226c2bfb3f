"""A consortium trace laid out as a timeline: one row per member call and arbiter, in seconds from
the start of the run, nested consortia indented under the member (or arbiter) that ran them.

Each row has `start`, `first` (first token, when one came) and `end`. A member's start is the
trace's `started_s`; it answered `latency_s` later, its successful attempt having begun
`total_s` before that and shown its first token `ttft_s` into it. The arbiter runs last in its
round, so it began `latency_s` before the round ended. Pure: a trace dict in, rows out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["timeline"]

_LOST = frozenset({"failed"})  # what degraded.py counts as a loss; cancelled: the quorum was met first


def timeline(trace: dict[str, Any]) -> dict[str, Any]:
    """Rows and a summary of one run (see the module docstring)."""
    rows: list[dict[str, Any]] = []
    _run(trace, 0.0, 0, rows)
    rounds = trace.get("rounds") or []
    budget = trace.get("budget") or {}
    return {
        "consortium": trace.get("consortium"), "judging": trace.get("judging"), "wall_s": trace.get("wall_s"),
        "calls": trace.get("calls"), "budget": budget.get("limit"), "confidence": trace.get("confidence"),
        "stopped": trace.get("stopped"), "rounds": len(rounds), "cost_usd": trace.get("cost_usd"),
        "verdicts": [_verdict(r) for r in rounds], "rows": rows,
    }


def _verdict(round_: dict[str, Any]) -> dict[str, Any]:
    arbiter = round_.get("arbiter") or {}
    return {"round": round_.get("iteration"), "arbiter": arbiter.get("arbiter"), "status": arbiter.get("status"),
            "ranking": list(arbiter.get("order") or []), "confidence": round_.get("confidence"),
            "fallback": arbiter.get("fallback")}


def _run(trace: dict[str, Any], offset: float, depth: int, rows: list[dict[str, Any]]) -> None:
    round_start = offset
    for round_ in trace.get("rounds") or []:
        round_end = round_start + float(round_.get("wall_s") or 0.0)
        arbiter = round_.get("arbiter")
        judged_from = round_end - float((arbiter or {}).get("latency_s") or 0.0)
        for member in round_.get("members") or []:
            row = _member(member, round_start, judged_from, depth, round_.get("iteration"))
            rows.append(row)
            if isinstance(member.get("trace"), dict):
                _run(member["trace"], row["start"], depth + 1, rows)
        if arbiter and arbiter.get("status") not in ("skipped", "waiting", None):
            row = _arbiter(arbiter, round_end, depth, round_.get("iteration"))
            rows.append(row)
            if isinstance(arbiter.get("trace"), dict):
                _run(arbiter["trace"], row["start"], depth + 1, rows)
        round_start = round_end


def _member(m: dict[str, Any], round_start: float, cut_at: float, depth: int, iteration: Any) -> dict[str, Any]:
    start = round_start + float(m["started_s"]) if m.get("started_s") is not None else round_start
    status = m.get("status")
    first = None
    if status == "cancelled":
        end = cut_at  # the quorum answered first: it ran until the arbiter began
    elif m.get("latency_s") is not None:
        end = start + float(m["latency_s"])
        if m.get("ttft_s") is not None and m.get("total_s") is not None:
            first = end - float(m["total_s"]) + float(m["ttft_s"])
    elif m.get("attempts"):
        end = start + sum(float(a.get("elapsed_s") or 0.0) for a in m["attempts"])
    else:
        end = cut_at
    return {"kind": "member", "label": f"{m.get('member')}#{m.get('sample')}", "depth": depth, "round": iteration,
            "start": start, "first": first, "end": max(end, start), "status": status, "lost": status in _LOST,
            "tokens": (m.get("tokens") or {}).get("output"), "note": m.get("note") or _last_error(m)}


def _arbiter(a: dict[str, Any], round_end: float, depth: int, iteration: Any) -> dict[str, Any]:
    latency = float(a.get("latency_s") or 0.0)
    start = round_end - latency
    first = start + float(a["ttft_s"]) if a.get("ttft_s") is not None else None
    return {"kind": "arbiter", "label": f"arbiter {a.get('arbiter')}", "depth": depth, "round": iteration,
            "start": start, "first": first, "end": round_end, "status": a.get("status"),
            "lost": a.get("status") in _LOST, "tokens": (a.get("tokens") or {}).get("output"),
            "note": a.get("fallback") or _last_error(a)}


def _last_error(record: dict[str, Any]) -> str | None:
    errors = record.get("attempts") or record.get("errors") or []
    if not errors:
        return None
    last = errors[-1]
    return f"{last.get('error')}: {last.get('message')}" if last.get("message") else last.get("error")
