"""Sessions: the router's unit of decision is an agent's task, not one call of it.

A session is one task of one API key. Its key is explicit where the client gives one
(`X-Session-Id`, `prompt_cache_key`, Anthropic's `metadata.user_id`, `session=` in the Python
API), else (`session="auto"`, what the server asks for) derived from the task: the user's own
first words with the harness set aside, with the system prompt and the tool set -- never from a
client's boilerplate alone. Either way it is namespaced by the API key the request came with
(router/request_context.py), so another key sending the same id, or the same conversation,
gets a session of its own and cannot move this one.

A session's state -- the tier it reached, the backend that answers it, how much of its prompt
that backend has cached, the routing model version it was placed by -- lives in a bounded table
in memory (least recently used dropped first, entries older than `ttl_s` forgotten), shared
through Redis when the router's state is (router/state/sessions_redis.py).

What a call makes of it is policies/sessions.py (the tier and the evidence that moves it) and
policies/selection.py (the backend kept, and what a move would cost in lost cache); this
module keeps the state. The routing model is handed in per call: a version installed by
learning places the next call of every session, one that started before included (it moves
up if the new version places its task higher, and never down).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from backends.errors import UsageError
from backends.types import Completion, Message, content_text
from policies.ladder import Crossing
from policies.routing_model import Placement, RoutingModel
from policies.scoring import Score
from policies.sessions import Turn, escalation, read_turn, restated
from policies.task import KNOWN, Shapes, Task, read_task
from policies.template import Learned
from router.request_context import CLIENT_KEY

__all__ = ["AUTO", "MAX_KEY_CHARS", "Session", "SessionKey", "SessionPlan", "SessionState", "SessionTable",
           "Sessions", "check_key", "derived_key", "owned", "turn_digest"]

MAX_KEY_CHARS = 256
AUTO = "auto"  # `session="auto"`: the session is the task the conversation shows
_DIGITS = re.compile(r"\d+")
_RETYPED_WORDS = 4  # a turn this long sent again word for word is the user asking again
_RESTATED_TURNS = 8  # earlier user turns a restated turn is compared with (the task's first words too)
_OWNER = "\x1f"  # between a key's name and its session id: check_key refuses it in ids


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class SessionState:
    """What the router knows of one session. Times: unix seconds."""

    tier: int  # index into the ladder's tiers: only ever moves up
    backend: str | None = None  # who answered the last call; kept while it is healthy
    backend_id: str = ""  # what that backend is (router/backend_table.py): a namesake elsewhere is not it
    calls: int = 0
    cached_tokens: int = 0  # the prompt the last call sent: what that backend's cache now holds
    cached_at: float = 0.0  # when that backend last saw it
    turn: str = ""  # digest of the last new turn that was answered (the same turn again: a signal)
    tool_errors: int = 0  # failed tool results in a row
    refused: bool = False  # the last answer was a refusal (content_filter)
    empty: bool = False  # the last answer was empty, or cut at its token limit
    since: str = ""  # why the session is at its tier, for the decision's reason
    version: int = 0  # the routing model version that placed it
    escalations: int = 0  # moves up on evidence so far
    length: int = 0  # messages in its last call: a conversation only grows
    opened: int = 0  # messages in its first call: a derived session's opening request sent again is a new run
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


def derived_key(messages: list[Message], tools: Any, task: Task | None = None) -> str | None:
    """A session id from the task: the user's own first words (what an agent resends unchanged
    every call), with the system prompt and the tool names. None when the conversation shows
    no words of the user's to key on: boilerplate alone would join unrelated runs."""
    task = task or read_task(messages, tools)
    first = task.first
    if task.harness_only or not first.strip():
        return None
    # The system prompt tells one agent or project from another; its numbers (today's date, a
    # platform's build, a count of files) change between runs of one task, and are left out.
    system = [_DIGITS.sub("#", content_text(m.get("content")))
              for m in messages if m.get("role") in ("system", "developer")][:1]
    names = sorted(str((t.get("function") or t).get("name")) for t in tools or () if isinstance(t, dict))
    digest = hashlib.blake2b(orjson.dumps([system, names, first]), digest_size=12)
    return "auto-" + digest.hexdigest()


def owned(label: str, owner: str | None) -> str:
    """A session's key in the table: its id in the namespace of the API key `owner` (None: the
    operator's: the CLI, the Python API, a server without keys)."""
    return f"{owner}{_OWNER}{label}" if owner is not None else label


def turn_digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class SessionKey:
    """`id`: the session's key in the table (namespaced by the API key); `label`: the id as the
    client knows it (headers, logs); `task`: the conversation's task, when deriving read it."""

    id: str
    label: str
    derived: bool = False
    task: Task | None = None


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

    def put(self, key: str, state: SessionState | None, **changes: Any) -> SessionState:
        """Store `state` with `changes` (fields of SessionState) as used now; returns what was
        stored. `state` None: a state of `changes` alone (what they leave out at its default)."""
        now = self._clock()
        # A new state when nothing is carried over: a frozen dataclass's replace() costs twice that.
        stored = SessionState(**changes, updated=now) if state is None else dataclasses.replace(state, updated=now,
                                                                                               **changes)
        self._states[key] = stored
        self._states.move_to_end(key)
        while len(self._states) > self.max_entries:
            self._states.popitem(last=False)
        return stored


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class SessionPlan:
    """What a session makes of one call: the tier (`index`), why it is there, the backend to
    keep and what each backend has cached; `state` as it was before this call; `signal` the
    evidence that moved it up on this call (policies/sessions.py), if any."""

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
    label: str = ""  # the id as the client knows it
    version: int = 0  # the routing model version that placed this call
    signal: str | None = None
    digest: str = ""  # of this call's conversation: the same one sent again after its answer is a signal
    task: Task | None = None  # what the conversation asks, read from its harness

    def without_texts(self) -> SessionPlan:
        """This plan without the conversation's words (digests and counts stay)."""
        return dataclasses.replace(self, turn=dataclasses.replace(self.turn, text="", first=""), task=None)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.label or self.key, "tier_index": self.index, "why": self.why,
                               "kept": self.sticky, "calls_before": self.state.calls if self.state else 0}
        if self.signal is not None:
            out["escalated"] = self.signal
        return out


class Sessions:
    """The sessions of one Router: the table, and the rules that read it (see the module
    docstring and policies/sessions.py). `cache_ttl_s`: how long a provider keeps a prompt
    cached (Anthropic's and OpenAI's shortest: five minutes)."""

    def __init__(self, table: SessionTable, *, cache_ttl_s: float = 300.0, clock: Callable[[], float] = time.time,
                 identity: Callable[[str], str] = str):
        self.table = table
        self.cache_ttl_s, self._clock = cache_ttl_s, clock
        self.identity = identity  # backend name -> what it is, so a fleet's other config never lends its backend
        self.shared: Any = None  # router/state/sessions_redis.py's SharedSessions, with Redis state

    def key_for(self, given: str, messages: list[Message], tools: Any, owner: str | None,
                shapes: Shapes = KNOWN) -> SessionKey | None:
        """The session of a call: `given` (an explicit id, or AUTO to derive one from the task),
        in `owner`'s namespace (the API key's name; None: the operator's). None when AUTO finds
        no task of the user's to key on."""
        if given != AUTO:
            return SessionKey(owned(given, owner), given)
        task = read_task(messages, tools, shapes)
        label = derived_key(messages, tools, task)
        return None if label is None else SessionKey(owned(label, owner), label, True, task)

    async def load(self, key: str) -> None:
        """What the fleet knows of session `key`, before deciding a call of it (Redis state only)."""
        if self.shared is not None:
            await self.shared.load(key)

    def _put(self, key: str, state: SessionState | None, **changes: Any) -> None:
        stored = self.table.put(key, state, **changes)
        if self.shared is not None:
            self.shared.save(key, stored)

    def plan(self, key: SessionKey, messages: list[Message], model: RoutingModel, tools: Any = None,
             learned: Learned | None = None, shapes: Shapes = KNOWN) -> SessionPlan:
        """What the session makes of this call (`tools`: the request's tool schemas, so that a
        call of a tool it does not offer counts as a failed step; `learned`: the client's
        template, read as a plain call reads it)."""
        state = self.table.get(key.id)
        if state is not None and _new_run(key, state, messages):
            state = None  # another run of the same task: a session of its own, from its own first call
        task = (read_task(messages, tools, shapes, learned) if learned is not None
                else key.task or read_task(messages, tools, shapes))
        turn = read_turn(messages, task, tools)
        digest = _digest(messages)
        index, why, score, crossings = _tier_for(model, state, turn)
        # Failed steps in a row: this turn's, added to the session's until a turn has none.
        errors = (state.tool_errors if state else 0) + turn.tool_errors if turn.tool_errors else 0
        step = escalation(index, model.top, _with_last_answer(turn, state), errors_in_a_row=errors,
                          repeated=_repeated(state, turn, messages, digest),
                          answered=state is not None and state.calls > 0)
        signal = None
        if step is not None:
            index, why, signal = step.tier, f"escalated ({step.signal}): {step.why}", step.signal
            errors = 0  # the new tier is judged on its own steps: one more failure is not two
        return SessionPlan(key.id, index, why, turn, score, crossings, state, errors, self._kept(state),
                           self._cached(state), len(messages), key.label, model.version, signal, digest, task)

    def _kept(self, state: SessionState | None) -> str | None:
        """The backend the session keeps: the one that answered it last, if it is the same here."""
        return state.backend if state is not None and self._same_backend(state) else None

    def _same_backend(self, state: SessionState) -> bool:
        """The session's backend is the one this router calls by that name (state written before
        identities were kept names none, and is taken at its word)."""
        return state.backend is not None and state.backend_id in ("", self.identity(state.backend))

    def _cached(self, state: SessionState | None) -> dict[str, int]:
        """backend -> prompt tokens it likely still holds in its cache (its last answer's input,
        within cache_ttl_s of it)."""
        if (state is None or state.backend is None or not self._same_backend(state)
                or self._clock() - state.cached_at >= self.cache_ttl_s):
            return {}
        return {state.backend: state.cached_tokens}

    def remember(self, plan: SessionPlan, completion: Completion | None) -> None:
        """After the call: who answered (a fallback becomes the session's backend), what it has
        cached now, and the tier the session reached."""
        state = plan.state
        kept = state is not None and plan.index <= state.tier
        changes: dict[str, Any] = {"tier": plan.index, "since": state.since if kept and state else plan.why,
                                   "tool_errors": plan.tool_errors, "version": plan.version,
                                   "escalations": (state.escalations if state else 0) + (plan.signal is not None),
                                   "length": plan.length, "opened": state.opened if state else plan.length}
        if completion is None:  # nothing answered: the tier holds, the backend stays to be tried again
            self._put(plan.key, state, **changes)
            return
        said_nothing = not completion.text.strip() and not completion.tool_calls
        # Every field is given: a new state, nothing carried over from the old one.
        self._put(plan.key, None, backend=completion.backend, backend_id=self.identity(completion.backend),
                  calls=(state.calls if state else 0) + 1,
                  cached_tokens=completion.usage.input_tokens, cached_at=self._clock(), turn=plan.digest,
                  refused=completion.finish_reason == "content_filter",
                  empty=completion.finish_reason == "length" or said_nothing, **changes)


def _tier_for(model: RoutingModel, state: SessionState | None,
              turn: Turn) -> tuple[int, str, Score | None, tuple[Crossing, ...]]:
    """(tier, why, score, crossings) of this call before any escalation: a task's first call
    climbs to what a plain call of the same conversation would (one scoring input:
    policies/task.py's scored_text); tool results keep the session's tier; a
    new turn may only move it up; a routing model the session was not placed by places its
    task again, and may only move it up too."""
    if state is None:  # a task the router has not seen: placed as a plain call of it would be
        placed = model.place_text(turn.scored)
        return _parts(placed, f"new session, task scored {_value(placed.score)}")
    if state.version != model.version:  # learned since: the task's place under this version
        placed = model.place_text(turn.scored)
        if placed.index > state.tier:
            state = dataclasses.replace(state, tier=placed.index, since=f"routing model v{model.version} places "
                                        f"the task higher (scored {_value(placed.score)})")
            if turn.continuation:
                return _parts(placed, state.since)
    if turn.continuation:
        return state.tier, f"tool results of the session's task (tier since: {state.since})", None, ()
    placed = model.place_text(turn.text)
    why = f"new turn scored {_value(placed.score)}"
    if placed.index <= state.tier:
        return state.tier, f"{why}; the session stays up (since: {state.since})", placed.score, placed.crossings
    return _parts(placed, why)


def _parts(placed: Placement, why: str) -> tuple[int, str, Score | None, tuple[Crossing, ...]]:
    return placed.index, why, placed.score, placed.crossings


def _with_last_answer(turn: Turn, state: SessionState | None) -> Turn:
    """`turn`, with what the session's last answer was (a refusal, empty or cut short) when the
    client's new turn does not show it itself."""
    if state is None or not (state.refused or state.empty) or turn.continuation:
        return turn
    return dataclasses.replace(turn, refusal=turn.refusal or state.refused, empty=turn.empty or state.empty)


def _digest(messages: list[Message]) -> str:
    """The conversation as far as this call goes: its length and its last message (past the
    system reminders some clients put after every turn)."""
    last = next((m for m in reversed(messages) if m.get("role") not in ("system", "developer")), {})
    return turn_digest(f"{len(messages)}\0{last.get('role')}\0{content_text(last.get('content'))}")


def _repeated(state: SessionState | None, turn: Turn, messages: list[Message], digest: str) -> bool:
    """The user asking again: the same conversation sent again after it was answered (a new
    turn or tool results alike; a retry after an error was never answered, so it is not this),
    or a new turn that repeats one of the user's earlier turns word for word. (A derived session
    sending its first turn again is another run of the same task, `_new_run`: never this.)"""
    if state is None:
        return False
    if state.turn == digest:
        return True
    if turn.continuation or len(turn.text.split()) < _RETYPED_WORDS:
        return False  # "ok", "continue" twice is a conversation going on, not a complaint
    return _retyped(turn, messages)


def _new_run(key: SessionKey, state: SessionState, messages: list[Message]) -> bool:
    """A derived session's call that starts the conversation again: shorter than what the session
    has seen, or its opening request sent once more after it was answered (a script run twice, a
    new chat with the same first words). A client that names its session says it is the same one."""
    if not key.derived:
        return False
    return len(messages) < state.length or (state.calls > 0 and len(messages) <= state.opened)


def _retyped(turn: Turn, messages: list[Message]) -> bool:
    """The user's words within an earlier turn as the client sent it (a harness wraps, never
    edits, them), or most of the words of the task or of an earlier turn again (the task
    restated)."""
    users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"][:-1]
    if any(turn.text in earlier for earlier in users):
        return True
    return len(users) > 0 and restated(turn.text, [turn.first, *users[-_RESTATED_TURNS:]])


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
        return sessions.table.get(owned(self.key, CLIENT_KEY.get())) if sessions is not None else None

    def close(self) -> None:
        if self.router.sessions is not None:
            self.router.sessions.table.forget(owned(self.key, CLIENT_KEY.get()))

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
