"""What went missing from a consortium run, in words a user can act on.

A consortium still answers when its arbiter failed (the first answer stands in) or when some
members failed (the quorum was enough), and that is right: but the answer is then weaker than the
configuration promised, so it must not look like a full run. `degraded(trace)` lists each such
loss, nested consortia included; `Completion.metadata["degraded"]` carries the list, which the CLI
shows in every mode and the server sends as a header and a field.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from router.consortium.trace import OUT_OF_TIME

__all__ = ["degraded"]


def degraded(trace: dict[str, Any]) -> list[str]:
    """One line per loss in this run and the runs nested in it; empty for a full run."""
    return list(_losses(trace, trace.get("consortium", "?")))


def _losses(trace: dict[str, Any], path: str) -> Iterator[str]:
    for round_ in trace.get("rounds", ()):
        members = round_.get("members", ())
        arbiter = round_.get("arbiter") or {}
        yield from _round_losses(f"{path}, round {round_.get('iteration')}", members, arbiter)
        for member in members:
            if "trace" in member:
                yield from _losses(member["trace"], f"{path}/{member['trace'].get('consortium', member['member'])}")
        if "trace" in arbiter:
            yield from _losses(arbiter["trace"], f"{path}/{arbiter['trace'].get('consortium', arbiter.get('arbiter'))}")


def _round_losses(where: str, members: Sequence[dict[str, Any]], arbiter: dict[str, Any]) -> Iterator[str]:
    """This round's own losses: failed member calls, a failed arbiter."""
    failed = [m for m in members if m.get("status") == "failed"]
    if failed:
        labels = ", ".join(f"{m['member']}#{m['sample']}" + (", out of time" if _timed_out(m) else "") for m in failed)
        yield f"{where}: {len(failed)} of {len(members)} member calls failed ({labels})"
    if arbiter.get("status") == "failed":
        errors = arbiter.get("errors") or [{}]
        why = errors[-1].get("message") or errors[-1].get("error") or "no reply"
        yield f"{where}: arbiter {arbiter.get('arbiter')} failed ({_short(why)}); the answer is an unjudged member answer"


def _timed_out(member: dict[str, Any]) -> bool:
    """Lost to a deadline (the run's, the request's or member_timeout_s), not to an error."""
    attempts = member.get("attempts") or [{}]
    return member.get("note") == OUT_OF_TIME or attempts[-1].get("error") == "BackendTimeout"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
