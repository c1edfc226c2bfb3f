"""The one interface every model implements, local or hosted, and the settings it is built from.

The base class does the plumbing once: the attempt's deadline, translating errors into ours
with the backend's name attached, assembling chunks and the Completion (usage estimate, cost,
timings, tool calls, drafts). A provider implements only its wire call, `_wire()`: an async
generator of Deltas for one attempt. Retries, budgets, breakers and latency learning are not a
backend's business: the router's call path owns them (router/calls.py).

Backends that produce chunks some other way (the in-process engine, a consortium) override
`stream()` and `complete()` directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from backends.assembly import Assembly, Delta
from backends.capabilities import Capabilities
from backends.deadline import Deadline, Watchdog
from backends.errors import AuthError, BackendError, BackendTimeout, BackendUnavailable, MalformedResponse, Where
from backends.faults import scrub
from backends.params import NoOptions
from backends.secrets import MissingVariable, expand_all
from backends.types import Chunk, Completion, FinalChunk, Price, Request, TextChunk, ThinkingChunk, Usage

__all__ = ["OUTPUT_CEILING", "Backend", "BackendSettings", "Decoding", "Delta", "Health"]

Decoding = Literal["autoregressive", "diffusion"]
T = TypeVar("T")

# Longer than any model's answer (the longest known are around 128k tokens): the bound on
# max_tokens for a backend whose limit neither the config nor litellm's map gives.
OUTPUT_CEILING = 1 << 20


@dataclass(frozen=True, slots=True)
class BackendSettings:
    """Everything a backend needs from config, as plain values (backends never see the YAML)."""

    name: str
    model: str
    base_url: str | None = None
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str | None = None
    price: Price = field(default_factory=Price)
    decoding: Decoding = "autoregressive"
    canvas_length: int = 256
    timeout_s: float = 60.0  # one attempt, unless the request says less
    max_retries: int = 2  # applied by the router's call path, not by the backend
    backoff_initial_s: float = 0.25
    context_window: int | None = None
    max_output_tokens: int | None = None  # None: Backend.output_limit finds it
    # Validated generation parameters, sent with every request under the request's own `extra`.
    params: dict[str, Any] = field(default_factory=dict)
    # Kind-specific settings (e.g. the diffusion-local engine's device and dtype), validated.
    options: dict[str, Any] = field(default_factory=dict)
    # Provider-specific parameters sent verbatim, deliberately unchecked.
    passthrough: dict[str, Any] = field(default_factory=dict)
    # Fields of `params` and `passthrough` whose configured value is a default a client may
    # change; every other configured field replaces a client's (backends/client_fields.py).
    client_params: frozenset[str] = frozenset()
    # Extra HTTP headers. Values, like URLs and parameters, may hold ${NAME} references,
    # resolved from the environment per request (`resolve`), never stored resolved.
    headers: dict[str, str] = field(default_factory=dict)

    def resolve(self, value: T) -> T:
        """`value` (a string, or dicts and lists of them) with ${NAME} references filled in from
        the environment; AuthError naming the variable when one is unset. An empty value, or a
        string without a reference, is handed back as it is (callers copy what they change)."""
        if not value or (isinstance(value, str) and "${" not in value):
            return value  # most backends set no passthrough or headers: no walk per request
        try:
            return cast(T, expand_all(value))
        except MissingVariable as missing:
            raise AuthError(f"environment variable {missing.name} is not set; the config of {self.name} refers "
                            f"to it as ${{{missing.name}}}; export it (values are read from the environment only)",
                            backend=self.name, model=self.model) from None

    def configured(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(every field `passthrough:` and `params:` set, ${NAME}s filled in; the part of it a
        client's value never replaces: all but `client_params`)."""
        values = {**self.resolve(self.passthrough), **self.params}
        if not self.client_params:
            return values, values
        return values, {key: value for key, value in values.items() if key not in self.client_params}

    def url(self, path: str, default_base: str) -> str:
        """`path` under the base URL, inserted before any query string (`?key=${KEY}` stays a query)."""
        base = self.base_url or default_base
        if "${" in base:  # resolved per call, and its value never kept
            return _join(self.resolve(base), path)
        return _joined(base, path)

    def api_key(self) -> str | None:
        """The key from the environment, read at call time; AuthError if it is configured but unset."""
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            from backends.env_names import lookalike_hint

            raise AuthError(
                f"environment variable {self.api_key_env} is not set{lookalike_hint(self.api_key_env)}; export it "
                f"with the API key for {self.model} (the key is read from the environment only, never from config)",
                backend=self.name,
                model=self.model,
            )
        return key


def _join(base: str, path: str) -> str:
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


# A base URL without references is the same on every call: split and joined once, not per request.
_joined = functools.lru_cache(maxsize=256)(_join)


@dataclass(frozen=True, slots=True)
class Health:
    """What `Backend.check` found: usable or not, and in words."""

    ok: bool
    detail: str


class Backend:
    """One model behind one async interface."""

    kind: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    # True for test doubles and the simulator: shown to users wherever the answer appears.
    simulated: ClassVar[bool] = False
    # Schemas of the config's `params:` and `options:` for this kind (checked at load).
    params_model: ClassVar[type[BaseModel]] = NoOptions
    options_model: ClassVar[type[BaseModel]] = NoOptions
    # Whether `_wire` runs in a task of its own (_WireTask), for client libraries that close a
    # connection in an await a second cancellation can interrupt (httpx's httpcore, under
    # litellm). The aiohttp kinds release a connection without awaiting, so they run in the
    # caller's task (`_run_inline`): a task switch and a queue less per chunk.
    wire_task: ClassVar[bool] = True

    def __init__(self, settings: BackendSettings):
        self.settings = settings

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def endpoint(self) -> str | None:
        """Where requests go, for error messages (never carries credentials)."""
        return None

    def where(self) -> Where:
        """The error context every BackendError of this backend carries."""
        return {"backend": self.name, "model": self.model}

    @property
    def shape(self) -> str:
        """How this backend writes a request: two backends of one shape send a request the same
        way, so one's refusal of it (the request's fault) stands for the other's, and the router
        does not try it (backends/faults.py, "a different shape"). The kind, unless a kind writes
        differently per upstream; a composite backend (a consortium) is a shape of its own."""
        return f"{self.kind}:{self.name}" if self.capabilities.composite else self.kind

    # -- what a provider implements ---------------------------------------------------------

    def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        """One attempt on the wire: the answer as Deltas (a non-streamed reply is one Delta).
        Raise BackendErrors, or let third-party errors out for `_translate`."""
        raise NotImplementedError(f"{type(self).__name__} implements neither _wire() nor stream()")

    def _translate(self, exc: Exception) -> BackendError:
        """A third-party error from `_wire` in our error tree."""
        return BackendUnavailable(f"{type(exc).__name__}: {scrub(str(exc))}", **self.where())

    def current_capabilities(self) -> Capabilities:
        """What this backend can take now: the kind's `capabilities`, unless its model decides
        (diffusion-local takes images only with a checkpoint that has a vision tower)."""
        return self.capabilities

    @functools.cached_property
    def output_limit(self) -> int:
        """The longest answer this backend gives, in tokens: the config's `max_output_tokens`,
        else litellm's map for its model, else its context window, else OUTPUT_CEILING."""
        if self.settings.max_output_tokens is not None:
            return self.settings.max_output_tokens
        from backends.model_map import model_entry

        known = model_entry(self.model).get("max_output_tokens")
        if isinstance(known, int) and known > 0:
            return known
        return self.settings.context_window or OUTPUT_CEILING

    def refusal(self, need: str) -> str | None:
        """Why this backend cannot take a request that needs `need` (tools, vision, context,
        structured), when there is more to say than its capabilities do; None otherwise."""
        return None

    def cost(self, usage: Usage) -> float:
        price = self.settings.price
        if (usage.cache_read_tokens or usage.cache_write_tokens) and not price.caches_known:
            price = self._cache_priced()
        return price.cost(usage)

    def _cache_priced(self) -> Price:
        # Looked up once, on the first answer that reports cached tokens (backends/prices.py).
        priced: Price | None = getattr(self, "_cache_price", None)
        if priced is None:
            from backends.prices import with_cache_prices

            priced = self._cache_price = with_cache_prices(self.settings.price, self.model, self.kind)
        return priced

    async def check(self, timeout_s: float = 5.0) -> Health:
        """A cheap check for `route doctor` that spends nothing: is this backend usable? The
        base checks the key; kinds that can look further (a server's model list, a checkpoint)
        override it. Errors a check raises are reported as a failed Health by the caller."""
        self.settings.api_key()
        return Health(True, f"{self.kind} backend ({'key present' if self.settings.api_key_env else 'no key needed'})")

    # -- the interface, written once ----------------------------------------------------------

    def deadline(self, request: Request) -> Deadline:
        """This attempt's deadline: the request's time left, capped by the backend's timeout."""
        return Deadline(self.settings.timeout_s).within(request.timeout_s)

    @property
    def keeps_deadline(self) -> bool:
        """Whether a plain call cuts itself at `request.timeout_s` (the wire path written here
        does, and takes an answer that arrived with the deadline); a kind that answers by its
        own `complete` or `stream` is guarded by the call path instead."""
        kind = type(self)
        return kind._wire is not Backend._wire and kind.complete is Backend.complete

    def stream(self, request: Request) -> AsyncGenerator[Chunk, None]:
        """TextChunk (and DraftChunk) items, then one FinalChunk."""
        return self._run(request, stream=True)

    async def complete(self, request: Request) -> Completion:
        # A backend that implements stream() alone is folded from its stream.
        wired = type(self)._wire is not Backend._wire
        async with contextlib.aclosing(self._run(request, stream=False) if wired else self.stream(request)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    return chunk.completion
        raise MalformedResponse("stream ended without a final completion", **self.where())

    def _run(self, request: Request, *, stream: bool) -> AsyncGenerator[Chunk, None]:
        return self._run_in_task(request, stream=stream) if self.wire_task else self._run_inline(request, stream=stream)

    async def _run_in_task(self, request: Request, *, stream: bool) -> AsyncGenerator[Chunk, None]:
        deadline = self.deadline(request)
        answer = Assembly(self)
        wire = _WireTask(self._wire(request, deadline, stream=stream), self.name)
        try:
            ended = False
            while not ended and (delta := await self._next(wire, deadline, answer.ttft is not None)) is not None:
                chunks = answer.apply(delta)
                # Deltas that are already here (one read brought several events) go up merged:
                # every layer above, and the client's socket, then handle one chunk instead of
                # one per token. Nothing waits for this; under load it merges more.
                failure: BackendError | None = None
                try:
                    while wire.ready():
                        more = await self._next(wire, deadline, True)  # ready: returns at once
                        if more is None:
                            ended = True
                            break
                        chunks += answer.apply(more)
                except BackendError as exc:
                    failure = exc  # after what came before it
                for chunk in merged(chunks):
                    yield chunk
                if failure is not None:
                    raise failure
        finally:
            wire.stop()
        for chunk in answer.finish():
            yield chunk

    async def _run_inline(self, request: Request, *, stream: bool) -> AsyncGenerator[Chunk, None]:
        """`_run` with the wire call in the caller's task: one task switch and no timer per
        chunk. The deadline is one timer for the whole attempt (Watchdog); a wire call that
        reads several events at once already hands them up folded (assembly.Fold)."""
        deadline = self.deadline(request)
        answer = Assembly(self)
        wire = self._wire(request, deadline, stream=stream)
        watchdog = Watchdog(deadline)
        try:
            while (delta := await self._wire_next(wire, watchdog, answer.ttft is not None)) is not None:
                for chunk in merged(answer.apply(delta)):
                    yield chunk
        finally:
            watchdog.stop()
            if isinstance(wire, AsyncGenerator):
                await wire.aclose()  # the HTTP kinds release (close) their connection without waiting
        for chunk in answer.finish():
            yield chunk

    async def _wire_next(self, wire: AsyncIterator[Delta], watchdog: Watchdog, answering: bool) -> Delta | None:
        try:
            return await watchdog.next(wire)
        except TimeoutError as exc:
            raise self._timeout(answering) from exc
        except BackendError:
            raise
        except Exception as exc:  # third-party errors: translated in one place per kind
            raise self._translate(exc) from exc

    def _timeout(self, answering: bool) -> BackendTimeout:
        where = f" from {self.endpoint}" if self.endpoint else ""
        what = f"the stream{where} stalled past the deadline" if answering else f"no answer{where} within the deadline"
        return BackendTimeout(what, **self.where())

    async def _next(self, wire: _WireTask, deadline: Deadline, answering: bool) -> Delta | None:
        try:
            if wire.ready():  # no wait, so no timer: the deadline cannot pass in between
                return wire.take()
            async with asyncio.timeout(deadline.remaining()):
                return await wire.next()
        except TimeoutError as exc:
            if wire.ready():  # it arrived in the same turn of the loop as the deadline: taken
                return wire.take()
            raise self._timeout(answering) from exc
        except BackendError:
            raise
        except Exception as exc:  # third-party errors: translated in one place per kind
            raise self._translate(exc) from exc

    async def aclose(self) -> None:
        """Release connections or engines. Safe to call twice."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.model!r})"


_END = object()


def merged(chunks: list[Chunk]) -> list[Chunk]:
    """`chunks` with each run of text (and of thinking) joined into one chunk; drafts stay
    apart, since each replaces the one before."""
    if len(chunks) < 2:
        return chunks
    out: list[Chunk] = []
    for chunk in chunks:
        last = out[-1] if out else None
        if isinstance(chunk, TextChunk) and isinstance(last, TextChunk):
            out[-1] = TextChunk(last.text + chunk.text)
        elif _continues(last, chunk):
            assert isinstance(last, ThinkingChunk) and isinstance(chunk, ThinkingChunk)
            out[-1] = ThinkingChunk(last.text + chunk.text, signature=chunk.signature)  # a signature ends a block
        else:
            out.append(chunk)
    return out


def _continues(last: Chunk | None, chunk: Chunk) -> bool:
    """`chunk` is more of the thinking block `last` holds: one still open (no signature yet),
    neither of them a redacted block (opaque data, whole)."""
    return (isinstance(chunk, ThinkingChunk) and isinstance(last, ThinkingChunk) and last.signature is None
            and last.redacted is None and chunk.redacted is None)


class _WireTask:
    """Runs a wire call in a task of its own, so that however the caller is stopped -- a timeout,
    a hedge that lost, a client that hung up, several of these at once -- the wire call receives
    exactly one cancellation. httpcore closes a connection in a shielded block that a second
    pending cancellation of the same task interrupts, leaving the upstream request open (and a
    paid generation running); one cancellation of a task nobody else cancels cannot be doubled."""

    _running: ClassVar[set[asyncio.Task[None]]] = set()  # strong references until cleanup ends

    def __init__(self, deltas: AsyncIterator[Delta], name: str):
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._task = asyncio.create_task(self._pump(deltas), name=f"route-wire-{name}")
        self._running.add(self._task)
        self._task.add_done_callback(self._running.discard)

    async def _pump(self, deltas: AsyncIterator[Delta]) -> None:
        try:
            async for delta in deltas:
                self._queue.put_nowait(delta)
            self._queue.put_nowait(_END)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the reader, which translates it
            self._queue.put_nowait(exc)

    def ready(self) -> bool:
        """Whether `take` has an item: a read of several events queues several deltas at once."""
        return not self._queue.empty()

    def take(self) -> Delta | None:
        return self._unpack(self._queue.get_nowait())

    async def next(self) -> Delta | None:
        return self._unpack(await self._queue.get())

    @staticmethod
    def _unpack(item: object) -> Delta | None:
        if item is _END:
            return None
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, Delta)
        return item

    def stop(self) -> None:
        """Cancel the wire call once; its own cleanup (closing the connection) runs to the end."""
        self._task.cancel()
