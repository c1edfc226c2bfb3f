"""A conversation at the terminal (`route chat`, `route --continue`, `--cid`): its id, and its
turns as the request log keeps them, read back to go on with it.

A conversation is one session (router/sessions.py) whose id is the conversation's: its tier only
moves up, on evidence, and every turn is logged under that id (`route log --cid ID`). Going on
from the log replays the turns as messages and starts the session at the highest tier a routed
turn had reached, so a follow-up in a new process does not demote the task either.

A one-shot `route "..."` is no session. `route --continue` after one goes on from that request:
the conversation's id is then `log-N` (N its id in the log), and that request is its first turn.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SOURCE", "Conversation", "new_id", "resume"]

SOURCE = "cli"  # the log's `source` of what the terminal asked: what `--continue` goes on from
_FROM_REQUEST = re.compile(r"^log-(\d+)$")


def new_id() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


@dataclass(slots=True)
class Conversation:
    """`messages`: the user's and the model's turns so far, oldest first (no system prompt: the
    log keeps none); `tier`: the highest tier a routed turn reached; `backend`: who answered the
    last routed turn; `cost_usd`: what the turns so far cost."""

    cid: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tier: str | None = None
    backend: str | None = None
    cost_usd: float = 0.0

    @property
    def turns(self) -> int:
        return sum(m["role"] == "user" for m in self.messages)

    def answered(self, result: Any, router: Any) -> None:
        """Note a routed turn's tier, when it is the highest so far, and who answered it."""
        decision = result.decision
        names = [tier.name for tier in router.tiers]
        if decision.forced or decision.tier not in names:
            return
        if self.tier not in names or names.index(decision.tier) >= names.index(self.tier):
            self.tier, self.backend = decision.tier, result.completion.backend

    def recall(self, router: Any) -> None:
        """Start the session again where the conversation was if `router` has forgotten it (a
        chat left idle longer than `sessions.ttl_s`): the next turn must not start afresh, lower."""
        sessions = router.sessions
        if sessions is not None and sessions.table.get(self.cid) is None:
            self.seed(router)

    def seed(self, router: Any) -> None:
        """Start `router`'s session for this conversation where the log left it: at its tier (a
        tier this config no longer has starts it afresh), keeping the backend that answered last."""
        sessions = router.sessions
        names = [tier.name for tier in router.tiers]
        if sessions is None or self.tier not in names:
            return
        backend = self.backend if self.backend in router.config.backends else None
        sessions.table.put(self.cid, None, tier=names.index(self.tier), backend=backend,
                           backend_id=sessions.identity(backend) if backend else "", calls=self.turns,
                           since=f"the conversation's tier in the request log ({self.cid})",
                           version=router.model.version)


def resume(store: Any, cid: str | None) -> Conversation:
    """Conversation `cid` from the request log `store`, or (None) the last one the terminal had:
    the newest answered request of the CLI, with the conversation it belongs to. A UsageError
    says why there is nothing to go on with."""
    from backends.errors import UsageError

    with store.guard():
        if cid is None:
            last = store.last_of(SOURCE)
            if last is None:
                raise UsageError("no conversation to continue: the request log holds no answered request from "
                                 'this terminal yet. Start one with `route chat` or `route "..."`.')
            cid = last["session"] or f"log-{last['id']}"
        rows = _rows(store, cid)
    if not rows:
        raise UsageError(f"no conversation {cid!r} in the request log: `route log` lists the recent requests, "
                         "and `route log --cid ID` one conversation's turns.")
    if any(row.get("prompt") is None or row.get("answer") is None for row in rows):
        raise UsageError(f"conversation {cid!r} cannot be continued: the request log kept no words of it "
                         "(log.store_content is false).")
    return _from_rows(cid, rows)


def _rows(store: Any, cid: str) -> list[dict[str, Any]]:
    """The answered turns of `cid`, oldest first; for `log-N`, request N first."""
    first: list[dict[str, Any]] = []
    match = _FROM_REQUEST.match(cid)
    if match:
        row = store.get(int(match.group(1)))
        if row is not None and row["status"] == "ok" and not row.get("session"):
            first = [row]
    return first + store.turns(cid)


def _from_rows(cid: str, rows: list[dict[str, Any]]) -> Conversation:
    conversation = Conversation(cid)
    tiers: list[str] = []
    for row in rows:
        conversation.messages += [{"role": "user", "content": row["prompt"]},
                                  {"role": "assistant", "content": row["answer"]}]
        conversation.cost_usd += row.get("cost_usd") or 0.0
        if row.get("requested") == "auto" and row.get("tier"):  # a routed turn, not a pinned one
            tiers.append(row["tier"])
            conversation.backend = row.get("backend")
    conversation.tier = _highest(tiers, rows)
    return conversation


def _highest(tiers: list[str], rows: list[dict[str, Any]]) -> str | None:
    """The highest of the tiers the turns reached, by the session's tier index the log recorded
    with each (a tier's name alone does not say its place)."""
    best: tuple[int, str] | None = None
    for row in rows:
        index = ((row.get("decision") or {}).get("session") or {}).get("tier_index")
        if row.get("tier") in tiers and isinstance(index, int) and (best is None or index > best[0]):
            best = (index, row["tier"])
    if best is not None:
        return best[1]
    return tiers[-1] if tiers else None
