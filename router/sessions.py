"""Sessions: the router's unit of decision is an agent's task, not one call of it.

A session's key is explicit where the client gives one (`X-Session-Id`, `prompt_cache_key`,
Anthropic's `metadata.user_id`, `session=` in the Python API), else derived from the
conversation's stable prefix: its system prompt, its tool set and its first user turn (the
parts an agent resends unchanged every call). Its state -- the tier it reached, the backend that
answers it, how much of its prompt that backend has cached -- lives in a bounded table in
memory (least recently used dropped first, entries older than `ttl_s` forgotten), shared
through Redis when the router's state is (router/state/sessions_redis.py).

What a call makes of it is policies/sessions.py (the tier) and policies/selection.py (the
backend kept, and what a move would cost in lost cache); this module keeps the state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from backends.errors import UsageError
from backends.types import Completion, Message, content_text
from policies.ladder import Crossing, Ladder
from policies.scoring import Score, Scorer
from policies.sessions import Turn, escalation, read_turn

__all__ = ["MAX_KEY_CHARS", "Session", "SessionPlan", "SessionState", "SessionTable", "Sessions", "check_key",
           "derived_key", "turn_digest"]

MAX_KEY_CHARS = 256


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the router knows of one session. Times: unix seconds."""

    tier: int  # index into the ladder's tiers: only ever moves up
    backend: str | None = None  # who answered the last call; kept while it is healthy
    calls: int = 0
    cached_tokens: int = 0  # the prompt the last call sent: what that backend's cache now holds
    cached_at: float = 0.0  # when that backend last saw it
    turn: str = ""  # digest of the last new turn that was answered (the same turn again: a signal)
    tool_errors: int = 0  # failed tool results in a row
    refused: bool = False  # the last answer was a refusal (content_filter)
    since: str = ""  # why the session is at its tier, for the decision's reason
    updated: float = 0.0

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, raw: bytes | str) -> SessionState | None:
        try:
            data = orjson.loads(raw)
            return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})
        except (orjson.JSONDecodeError, TypeError, KeyError):
            return None  # written by another version: start the session afresh


def check_key(key: Any, where: str) -> str:
    """An explicit session key, or a UsageError naming `where` it came from and what is wrong."""
    if not isinstance(key, str) or not key:
        raise UsageError(f"{where} must be a non-empty string naming the session")
    if len(key) > MAX_KEY_CHARS:
        raise UsageError(f"{where} is {len(key)} characters long; a session id is at most {MAX_KEY_CHARS} "
                         "(send a hash of a longer one)")
    if not key.isprintable() or not key.isascii():
        raise UsageError(f"{where} holds characters that are not printable ASCII; send a plain id such as a UUID")
    return key


def derived_key(messages: list[Message], tools: Any) -> str | None:
    """A session key from what an agent resends unchanged every call: the system prompt, the
    tool names, the first user turn. None when there is no user turn to key on."""
    first = next((m for m in messages if m.get("role") == "user"), None)
    if first is None:
        return None
    system = [content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer")][:1]
    names = sorted(str((t.get("function") or t).get("name")) for t in tools or () if isinstance(t, dict))
    digest = hashlib.blake2b(orjson.dumps([system, names, content_text(first.get("content"))]), digest_size=12)
    return "auto-" + digest.hexdigest()


def turn_digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


class SessionTable:
    """Session states in memory, at most `max_entries` (least recently used dropped first), each
    forgotten `ttl_s` after it was last used. `clock`: unix seconds."""

    def __init__(self, *, max_entries: int = 10_000, ttl_s: float = 3600.0,
                 clock: Callable[[], float] = time.time):
        self.max_entries, self.ttl_s, self._clock = max_entries, ttl_s, clock
        self._states: OrderedDict[str, SessionState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, key: str) -> SessionState | None:
        state = self._states.get(key)
        if state is None:
            return None
        if self._clock() - state.updated > self.ttl_s:
            del self._states[key]
            return None
        self._states.move_to_end(key)
        return state

    def forget(self, key: str) -> None:
        self._states.pop(key, None)

    def put(self, key: str, state: SessionState, **changes: Any) -> SessionState:
        """Store `state` with `changes` (fields of SessionState) as used now; returns what was stored."""
        stored = self._states[key] = dataclasses.replace(state, updated=self._clock(), **changes)
        self._states.move_to_end(key)
        while len(self._states) > self.max_entries:
            self._states.popitem(last=False)
        return stored


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """What a session makes of one call: the tier (`index`), why it is there, the backend to
    keep and what each backend has cached; `state` as it was before this call."""

    key: str
    index: int
    why: str
    turn: Turn
    score: Score | None  # None for tool results: nothing new was scored
    crossings: tuple[Crossing, ...]
    state: SessionState | None
    tool_errors: int
    sticky: str | None = None
    cached: dict[str, int] = dataclasses.field(default_factory=dict)
    length: int = 0  # messages in this call

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.key, "tier_index": self.index, "why": self.why, "kept": self.sticky,
                "calls_before": self.state.calls if self.state else 0}


class Sessions:
    """The sessions of one Router: the table, and the rules that read it (see the module
    docstring and policies/sessions.py). `cache_ttl_s`: how long a provider keeps a prompt
    cached (Anthropic's and OpenAI's shortest: five minutes)."""

    def __init__(self, ladder: Ladder, scorer: Scorer, table: SessionTable, *, cache_ttl_s: float = 300.0,
                 clock: Callable[[], float] = time.time):
        self.ladder, self.scorer, self.table = ladder, scorer, table
        self.cache_ttl_s, self._clock = cache_ttl_s, clock
        self.shared: Any = None  # router/state/sessions_redis.py's SharedSessions, with Redis state

    async def load(self, key: str) -> None:
        """What the fleet knows of session `key`, before deciding a call of it (Redis state only)."""
        if self.shared is not None:
            await self.shared.load(key)

    def _put(self, key: str, state: SessionState, **changes: Any) -> None:
        stored = self.table.put(key, state, **changes)
        if self.shared is not None:
            self.shared.save(key, stored)

    def _tier_of(self, text: str) -> tuple[int, Score | None, tuple[Crossing, ...]]:
        """The tier a user turn's own text climbs to, scored alone."""
        messages: list[Message] = [{"role": "user", "content": text}]
        score = self.scorer.score(messages)
        index, crossings = self.ladder.climb(messages, score)
        return index, score, crossings

    def plan(self, key: str, messages: list[Message]) -> SessionPlan:
        state = self.table.get(key)
        turn = read_turn(messages)
        index, why, score, crossings = self._tier_for(state, turn)
        # Tool errors in a row: this turn's, added to the session's until a turn has none.
        errors = (state.tool_errors if state else 0) + turn.tool_errors if turn.tool_errors else 0
        if state is not None and state.refused and not turn.refusal:
            turn = dataclasses.replace(turn, refusal=True)
        step = escalation(index, len(self.ladder.tiers) - 1, turn, errors_in_a_row=errors,
                          repeated=_repeated(key, state, turn, messages))
        if step is not None:
            index, why = step.tier, f"escalated: {step.why}"
        backend = state.backend if state is not None else None
        return SessionPlan(key, index, why, turn, score, crossings, state, errors, backend, self._cached(state),
                           len(messages))

    def _cached(self, state: SessionState | None) -> dict[str, int]:
        """backend -> prompt tokens it likely still holds in its cache (its last answer's input,
        within cache_ttl_s of it)."""
        if state is None or state.backend is None or self._clock() - state.cached_at >= self.cache_ttl_s:
            return {}
        return {state.backend: state.cached_tokens}

    def _tier_for(self, state: SessionState | None, turn: Turn) -> tuple[int, str, Score | None, tuple[Crossing, ...]]:
        """(tier, why, score, crossings) of this call before any escalation: a task's first
        call climbs to what its first or latest turn needs; tool results keep the session's
        tier; a new turn may only move it up."""
        if state is None:  # a task the router has not seen: its first turn, and this one
            index, score, crossings = self._tier_of(turn.first)
            why = f"new session, task scored {_value(score)}"
            if turn.text and turn.text != turn.first:
                latest = self._tier_of(turn.text)
                if latest[0] > index:
                    index, score, crossings = latest
                    why = f"new session, latest turn scored {_value(score)}"
            return index, why, score, crossings
        if turn.continuation:
            return state.tier, f"tool results of the session's task (tier since: {state.since})", None, ()
        index, score, crossings = self._tier_of(turn.text)
        why = f"new turn scored {_value(score)}"
        if index <= state.tier:
            index, why = state.tier, f"{why}; the session stays up (since: {state.since})"
        return index, why, score, crossings

    def remember(self, plan: SessionPlan, completion: Completion | None) -> None:
        """After the call: who answered (a fallback becomes the session's backend), what it has
        cached now, and the tier the session reached."""
        state = plan.state or SessionState(tier=plan.index)
        moved = plan.state is None or plan.index > plan.state.tier
        since = plan.why if moved else state.since
        if completion is None:  # nothing answered: the tier holds, the backend stays to be tried again
            self._put(plan.key, state, tier=plan.index, since=since, tool_errors=plan.tool_errors)
            return
        answered = plan.turn.text if not plan.turn.continuation else None
        self._put(plan.key, state, tier=plan.index, backend=completion.backend, calls=state.calls + 1,
                  cached_tokens=completion.usage.input_tokens, cached_at=self._clock(),
                  turn=turn_digest(f"{plan.length}\0{answered}") if answered is not None else state.turn,
                  tool_errors=plan.tool_errors, refused=completion.finish_reason == "content_filter", since=since)


def _repeated(key: str, state: SessionState | None, turn: Turn, messages: list[Message]) -> bool:
    """The same request sent again (the conversation no longer, its last turn the same): a user
    asking for another answer. "go on" after an answer is a longer conversation, not this."""
    return (state is not None and not turn.continuation and not key.startswith("auto-")
            and state.turn == turn_digest(f"{len(messages)}\0{turn.text}"))


def _value(score: Score | None) -> str:
    return "-" if score is None else f"{score.value:.3f}"


class Session:
    """One task's calls through a Router, as one session: `async with router.session() as s:
    await s.acomplete(...)`. Every call passes `session=` for you; leaving the block forgets
    the session."""

    def __init__(self, router: Any, key: str | None = None):
        self.router = router
        self.key = check_key(key, "Router.session(key)") if key is not None else f"py-{uuid.uuid4().hex}"

    async def acomplete(self, prompt_or_messages: Any, **options: Any) -> Any:
        return await self.router.acomplete(prompt_or_messages, session=self.key, **options)

    def astream(self, prompt_or_messages: Any, **options: Any) -> Any:
        return self.router.astream(prompt_or_messages, session=self.key, **options)

    def complete(self, prompt_or_messages: Any, **options: Any) -> Any:
        return self.router.complete(prompt_or_messages, session=self.key, **options)

    def stream(self, prompt_or_messages: Any, **options: Any) -> Any:
        return self.router.stream(prompt_or_messages, session=self.key, **options)

    def explain(self, prompt_or_messages: Any, **options: Any) -> Any:
        return self.router.explain(prompt_or_messages, session=self.key, **options)

    @property
    def state(self) -> SessionState | None:
        """What the router knows of this session so far (tier, backend, calls)."""
        sessions = self.router.sessions
        return sessions.table.get(self.key) if sessions is not None else None

    def close(self) -> None:
        if self.router.sessions is not None:
            self.router.sessions.table.forget(self.key)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
