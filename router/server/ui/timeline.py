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
        round_start = _round(round_, round_start, depth, rows)


def _round(round_: dict[str, Any], start: float, depth: int, rows: list[dict[str, Any]]) -> float:
    """Rows of one round (members, then its arbiter); returns when the round ended."""
    end = start + float(round_.get("wall_s") or 0.0)
    arbiter = round_.get("arbiter") or {}
    judged_from = end - float(arbiter.get("latency_s") or 0.0)
    for member in round_.get("members") or []:
        _add(rows, _member(member, start, judged_from, depth, round_.get("iteration")), member, depth)
    if arbiter.get("status") not in ("skipped", "waiting", None):
        _add(rows, _arbiter(arbiter, end, depth, round_.get("iteration")), arbiter, depth)
    return end


def _add(rows: list[dict[str, Any]], row: dict[str, Any], record: dict[str, Any], depth: int) -> None:
    """`row`, then the rows of the consortium run it stands for, if it was one."""
    rows.append(row)
    if isinstance(record.get("trace"), dict):
        _run(record["trace"], row["start"], depth + 1, rows)


def _member_end(m: dict[str, Any], start: float, cut_at: float) -> tuple[float, float | None]:
    """(end, first token) of a member call."""
    if m.get("status") == "cancelled":
        return cut_at, None  # the quorum answered first: it ran until the arbiter began
    if m.get("latency_s") is None:
        return start + sum(float(a.get("elapsed_s") or 0.0) for a in m.get("attempts") or ()), None
    end = start + float(m["latency_s"])
    if m.get("ttft_s") is None or m.get("total_s") is None:
        return end, None
    return end, end - float(m["total_s"]) + float(m["ttft_s"])


def _member(m: dict[str, Any], round_start: float, cut_at: float, depth: int, iteration: Any) -> dict[str, Any]:
    start = round_start + float(m.get("started_s") or 0.0)
    end, first = _member_end(m, start, cut_at)
    status = m.get("status")
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
