"""The one request flow of every POST `route serve` answers, whatever its protocol.

    body     read with one size limit and one time limit (413, 408)
    parse    the path's dialect turns it into a Call (router/server/protocols/), or a 400
    model    `auto`, a backend, a consortium or an alias (404 otherwise)
    route    Router.acomplete / Router.astream: the decision, fallbacks, the one call path
    answer   the dialect writes the result, the stream's events, or the error, in its shape

A stream waits for its first content before answering, so that a failure of every backend is
still an HTTP error status rather than an error event inside a 200. A watcher task listens for
the client going away and cancels the handler, which closes the upstream stream, so an
abandoned request stops costing tokens at once. POSTs that answer without routing (token
counts, feedback) are `Plain` handlers and share the body reading and the error shapes. The
flow's own I/O is here too, as raw ASGI messages (no Request/Response objects on the proxy's
hot path).

Errors a client sees name the backend, never where it lives: the upstreams' addresses are
scrubbed from their messages (`Scrubber`). Every request is one line on the `route.access`
logger (method, path, status, who answered, time; errors with their reason), as uvicorn and
every gateway log them; `route serve --quiet` turns it off.

Auth and per-key limits wrap this (router/server/auth.py, keys.py), once, for every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from backends.client_fields import beta_names
from backends.errors import RouteError, UsageError
from backends.types import Chunk, Completion, DraftChunk, FinalChunk, TextChunk, ThinkingChunk, ToolCallChunk
from router.decision import Decision, Downgrade
from router.server.errors import ApiError, error_for_failure
from router.server.keys import KEY_SCOPE
from router.server.protocols.base import Call, Dialect, EventWriter, Facts, bad_request, sent_fields
from router.sessions import AUTO, check_key

if TYPE_CHECKING:
    from router.decision import Watch
    from router.ports import RouterService
    from router.server.metrics import Served
    from router.server.models import ModelNames

__all__ = ["JSON", "AccessLines", "ClientGone", "ClientWatch", "Endpoint", "Plain", "Routed", "Scrubber",
           "decision_headers", "read_body", "send_body"]

ACCESS = logging.getLogger("route.access")

JSON = (b"content-type", b"application/json")
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class ClientGone(Exception):
    """The client disconnected before its request body arrived: there is nobody to answer."""


async def read_body(scope: dict, receive: Any, limit: int, timeout_s: float | None) -> bytes:
    """The whole request body: 413 as soon as it is known to exceed `limit` bytes, 408 when it
    has not all arrived `timeout_s` seconds after the head (a slow client holds no more)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise _too_large(limit)
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(receive, limit)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s (route serve --body-timeout)",
                       code="request_timeout", headers={"connection": "close"}) from None


async def _read(receive: Any, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        parts.append(chunk)
        if not message.get("more_body"):
            return b"".join(parts)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than the server's limit of {limit} bytes; "
                         "send less, or start `route serve` with a larger --max-body",
                    # The rest of the body is never read: the connection cannot carry another request.
                    code="request_too_large", headers={"connection": "close"})


async def send_body(send: Any, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = (JSON,)) -> None:
    """A whole response: status, headers (with its length), body."""
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class ClientWatch:
    """Cancels the handler's task when the client disconnects before the answer is complete.

    `close` lets go of both tasks: the cancelled watcher keeps its CancelledError, whose
    traceback holds `_watch`'s frame and so this object; were the tasks still held here, each
    request would leave a reference cycle (its two tasks, their frames, contexts and the
    connection's receive) for the cyclic collector, which runs rarely: 1,175 of them, pinning
    pymalloc arenas, were found in a `route serve` idle after a benchmark."""

    __slots__ = ("gone", "done", "_task", "_watcher")

    def __init__(self, receive: Any):
        self.gone = False
        self.done = False  # set before the last send: a disconnect after it is the normal end
        task = asyncio.current_task()
        assert task is not None  # constructed inside the request handler's task
        self._task: asyncio.Task | None = task
        self._watcher: asyncio.Task | None = asyncio.get_running_loop().create_task(self._watch(receive))

    async def _watch(self, receive: Any) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self.done and self._task is not None:
            self.gone = True
            self._task.cancel()

    def close(self) -> None:
        self.done = True
        if self._watcher is not None:
            self._watcher.cancel()
        self._task = self._watcher = None



@dataclass(frozen=True, slots=True)
class Plain:
    """A POST answered with JSON, without routing: `handle(body, scope)` returns the answer's
    body or raises ApiError; `error_body` writes errors in its API's shape; `max_body` (bytes)
    lowers the server's body limit for it."""

    handle: Callable[[bytes, dict], Awaitable[bytes]]
    error_body: Callable[[ApiError], bytes]
    max_body: int | None = None


Handler = Dialect | Plain


class Routed(Protocol):
    """The handlers of a family of paths under `prefix` whose path says what a request asks
    (Gemini's `/v1beta/models/{model}:{method}`): `bind` makes one request's handler."""

    prefix: str

    def bind(self, scope: dict) -> Handler: ...


def decision_headers(decision: Decision, downgrade: Downgrade | None) -> list[tuple[bytes, bytes]]:
    """`downgrade`: a weaker tier answering, as known when the headers go out: for a plain call
    what answered, for a stream the backend it committed to with its first content."""
    headers = [(b"x-route-backend", decision.chosen.encode()),
               (b"x-route-tier", (decision.tier or ("forced" if decision.forced else "-")).encode()),
               (b"x-route-candidates", ",".join(decision.candidates).encode())]
    if decision.score is not None:
        headers.append((b"x-route-score", f"{decision.score.value:.4f}".encode()))
    if downgrade is not None:  # a weaker tier than the prompt's answers: never silently
        headers.append((b"x-route-downgraded", downgrade.header().encode()))
    if decision.session is not None:
        headers.append((b"x-route-session", decision.session.label.encode()))
    headers.append((b"x-route-version", str(decision.version).encode()))  # the routing model version that decided
    return headers


# Header values are plain ASCII: what our messages use beyond it, written the ASCII way.
_ASCII = str.maketrans({"…": "...", "→": "->", "←": "<-", "—": "-", "–": "-", "‘": "'", "’": "'", "“": '"',
                        "”": '"', "×": "x", "·": "-", "≥": ">=", "≤": "<="})


def _degraded_header(completion: Completion) -> list[tuple[bytes, bytes]]:
    """`x-route-degraded: N; first loss` when a consortium answered with less than configured."""
    import unicodedata

    lost = completion.metadata.get("degraded")
    if not lost:
        return []
    text = unicodedata.normalize("NFKD", f"{len(lost)}; {lost[0]}".translate(_ASCII))
    value = text.encode("ascii", "ignore")  # what is left beyond ASCII: accents, dropped from their letters
    return [(b"x-route-degraded", value[:297] + b"..." if len(value) > 300 else value)]


def _facts(completion: Completion, downgrade: Downgrade | None = None) -> Facts | None:
    """What the router adds about an answer: a downgrade, a degraded consortium's losses."""
    facts: Facts = {"downgraded": downgrade.as_dict()} if downgrade is not None else {}
    lost = completion.metadata.get("degraded")
    if lost:
        facts["degraded"] = list(lost)
    return facts or None


async def _first_content(chunks: AsyncIterator[Chunk], drafts: bool) -> Chunk | None:
    """The first chunk there is something to send for (a draft only to a client that wants
    drafts), or the final chunk of an empty answer; None if the stream ends without one."""
    async for chunk in chunks:
        if drafts or not isinstance(chunk, DraftChunk):
            return chunk
    return None


class Scrubber:
    """Replaces the addresses of the router's upstreams (URLs with any path, `host:port`, the
    `('host', port)` an OS error quotes) with the backend's name -- "[upstream]" where several
    backends share one address -- in what clients are told."""

    def __init__(self, endpoints: Mapping[str, str | None]):
        patterns = []
        addresses = {name: re.match(r"(?:\w+://)?([^/:\s]+)(?::(\d+))?", url) for name, url in endpoints.items() if url}
        shared = [m.groups() for m in addresses.values() if m is not None]
        for name, parts in addresses.items():
            if parts is None:
                continue
            host, port = re.escape(parts.group(1)), parts.group(2)
            address = f"{host}:{port}" if port else host
            quoted_port = port or r"\d+"
            url = r"\w+://" + address + r"[^\s'\")]*"
            pair = r"\('" + host + "', " + quoted_port + r"\)"
            label = f"backend {name!r}" if shared.count(parts.groups()) == 1 else "[upstream]"
            patterns.append((f"{url}|{pair}|{address}" + r"\b", label))
        self._patterns = [(re.compile(pattern), name) for pattern, name in patterns]

    def __call__(self, text: str) -> str:
        for pattern, name in self._patterns:
            text = pattern.sub(name, text)
        return text


class Endpoint:
    """The ASGI callable for every path in `handlers`. `router.source` should be "server", so
    the request log says so. Each routed request is watched by `served` (metrics.py `Served`)."""

    def __init__(self, router: RouterService, served: Served, names: ModelNames, handlers: Mapping[str, Handler], *,
                 body_limit_bytes: int, body_timeout_s: float | None = None, routed: Iterable[Routed] = ()):
        self.router, self.served, self.names = router, served, names
        self.metrics = served.metrics
        self.handlers = dict(handlers)
        self.routed = tuple(routed)
        self.body_limit = body_limit_bytes
        self.body_timeout_s = body_timeout_s
        self.scrub = Scrubber({name: router.view.backend(name).endpoint for name in router.view.config.backends})
        self.sessions = router.view.sessions is not None  # routing.sessions: fixed when the router was built

    def _failure(self, exc: BaseException) -> ApiError:
        err = error_for_failure(exc)
        err.message = self.scrub(err.message)
        return err

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        started = time.perf_counter()
        outcome = await self._answer(scope, receive, send)
        if ACCESS.isEnabledFor(logging.INFO):
            _log_access(scope, outcome, time.perf_counter() - started)

    def serves(self, path: str) -> bool:
        return path in self.handlers or any(path.startswith(family.prefix) for family in self.routed)

    def _handler(self, scope: dict) -> Handler:
        handler = self.handlers.get(scope["path"])
        if handler is None:
            return next(f for f in self.routed if scope["path"].startswith(f.prefix)).bind(scope)
        return handler

    async def _answer(self, scope: dict, receive: Any, send: Any) -> _Outcome:
        handler = self._handler(scope)
        limit = self.body_limit
        if isinstance(handler, Plain) and handler.max_body is not None:
            limit = min(limit, handler.max_body)
        try:
            raw = await read_body(scope, receive, limit, self.body_timeout_s)
            if isinstance(handler, Plain):
                await send_body(send, 200, await handler.handle(raw, scope))
                return _Outcome(200)
            call = handler.parse(raw)
            sent_fields(call.extra)
            model = self.names[call.model]
            session = self._session(scope, call)
            _anthropic_betas(scope, call)
        except ApiError as err:
            return await _send_error(send, handler, err)
        except ClientGone:
            return _Outcome(499, reason="the client left before its request arrived")
        watch = ClientWatch(receive)
        served = self.served.watch(handler.protocol, scope.get(KEY_SCOPE))
        self.metrics.in_flight.inc()
        try:
            return await (self._stream if call.stream else self._complete)(handler, call, model, session, send, watch,
                                                                            served)
        except asyncio.CancelledError:
            if not watch.gone:
                raise  # the server is stopping, not the client leaving
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return _Outcome(499, reason="the client left")
        finally:
            watch.close()
            self.metrics.in_flight.dec()

    def _session(self, scope: dict, call: Call) -> str | None:
        """The session this call names: `X-Session-Id`, else what the protocol names
        (prompt_cache_key, metadata.user_id), else `auto` (the router derives it from the task);
        a 400 naming where it came from for an id that is too long or not printable. The router
        keeps each API key's sessions apart (router/sessions.py)."""
        if not self.sessions:
            return None
        given = next((value for name, value in scope["headers"] if name == b"x-session-id"), None)
        where, key = ("the X-Session-Id header", given.decode("latin-1")) if given is not None else \
            ("the request's session id (prompt_cache_key or metadata.user_id)", call.session)
        if key is None:
            return AUTO
        try:
            return check_key(key, where)
        except UsageError as exc:
            param = "X-Session-Id" if given is not None else "session"
            raise ApiError(400, str(exc), code="invalid_session_id", param=param) from None

    async def _complete(self, dialect: Dialect, call: Call, model: str, session: str | None, send: Any,
                        watch: ClientWatch, served: Watch) -> _Outcome:
        try:
            result = await self.router.scope.acomplete(call.messages, watch=served, **call.options(model, session))
        except RouteError as exc:
            return await _send_error(send, dialect, self._failure(exc))
        self.metrics.decided(result.decision)
        completion, downgrade = result.completion, result.downgrade
        body = dialect.body(call, completion, _facts(completion, downgrade))
        headers = [JSON, (b"x-route-answered-by", completion.backend.encode()),
                   *decision_headers(result.decision, downgrade), *_degraded_header(completion)]
        watch.done = True
        await send_body(send, 200, body, headers)
        return _Outcome(200, completion.backend)

    async def _stream(self, dialect: Dialect, call: Call, model: str, session: str | None, send: Any,
                      watch: ClientWatch, served: Watch) -> _Outcome:
        try:
            route_stream = self.router.scope.astream(call.messages, watch=served, **call.options(model, session))
            decision = await route_stream.start()  # what other replicas learned, then the decision
        except RouteError as exc:
            return await _send_error(send, dialect, self._failure(exc))
        self.metrics.decided(decision)
        writer = dialect.writer(call)
        # A client that leaves cancels this task; RouteStream reports that outcome to the log itself.
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            try:
                first = await _first_content(chunks, drafts=bool(call.echo.get("diffusing")))
            except RouteError as exc:
                return await _send_error(send, dialect, self._failure(exc))
            # Headers go out with the first content: who answers is known by then, a fallback too.
            answering = [(b"x-route-answered-by", route_stream.answering.encode())] if route_stream.answering else []
            framing = getattr(writer, "headers", None) or SSE  # a stream that is not server-sent events says so
            await send({"type": "http.response.start", "status": 200,
                        "headers": [*framing, *answering, *decision_headers(decision, route_stream.downgrade)]})
            failure = await _pump(writer, first, chunks, send, watch, self._failure)
        result = route_stream.result
        return _Outcome(200, result.completion.backend if result is not None else decision.chosen,
                        failure.message if failure is not None else None)


async def _pump(writer: EventWriter, first: Chunk | None, chunks: AsyncIterator[Chunk], send: Any,
                watch: ClientWatch, failed: Callable[[BaseException], ApiError]) -> ApiError | None:
    """The stream's events, from its first content to the end. Read to the end even when the
    first chunk was already the final one (a stream that is only a tool call): the route stream
    logs its outcome when it ends, and one closed early is logged as the client going away."""
    final = first if isinstance(first, FinalChunk) else None
    opening = writer.start() + (_event(writer, first) if first is not None and final is None else b"")
    await send({"type": "http.response.body", "body": opening, "more_body": True})
    try:
        async for chunk in chunks:
            if type(chunk) is TextChunk:  # the common case first: one per token or canvas
                data = writer.text(chunk.text)
            elif isinstance(chunk, FinalChunk):
                final = chunk
                continue
            else:
                data = _event(writer, chunk)
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
    except RouteError as exc:
        # Text already went out: the only honest signal left is the API's error event.
        watch.done = True
        err = failed(exc)
        await send({"type": "http.response.body", "body": writer.error(err)})
        return err
    completion = final.completion if final is not None else None
    watch.done = True
    await send({"type": "http.response.body",
                "body": writer.finish(completion, _facts(completion) if completion is not None else None)})
    return None


def _event(writer: EventWriter, chunk: Chunk) -> bytes:
    if isinstance(chunk, TextChunk):
        return writer.text(chunk.text)
    if isinstance(chunk, ThinkingChunk):
        return writer.thinking(chunk.text, chunk.signature, chunk.redacted)
    if isinstance(chunk, ToolCallChunk):
        return writer.tool_call(chunk)
    if isinstance(chunk, DraftChunk):
        return writer.draft(chunk.text)
    return b""  # the final chunk is the flow's; a kind of chunk this writer has no event for


async def _send_error(send: Any, handler: Handler, err: ApiError) -> _Outcome:
    headers = [JSON, *((k.encode(), v.encode()) for k, v in err.headers.items())]
    await send_body(send, err.status, handler.error_body(err), headers)
    return _Outcome(err.status, reason=err.message)


def _anthropic_betas(scope: dict, call: Call) -> None:
    """A client's `anthropic-beta` header goes with its request to an anthropic backend (the
    features it names: interleaved thinking, context management, structured outputs...), after
    any the body's `anthropic_beta` names (checked with the rest of the body: sent_fields)."""
    for name, value in scope["headers"]:
        if name == b"anthropic-beta":
            betas = [b.strip() for b in value.decode("latin-1").split(",") if b.strip()]
            if len(beta_names(betas)) != len(betas):
                raise bad_request("the anthropic-beta header must be beta feature names separated by commas "
                                  "(letters, digits, '.', '_', '-')", "anthropic-beta")
            call.extra["anthropic_beta"] = [*call.extra.get("anthropic_beta", []), *betas]


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What the access log says of one request: its status (499: the client left), who
    answered, and why it failed."""

    status: int
    backend: str | None = None
    reason: str | None = None


class AccessLines(logging.StreamHandler):
    """`route serve`'s handler of the access log (runner.py installs it): each line on the
    stream as `INFO:     line`, uvicorn's format. While it is the access logger's only way out
    (no filters, nothing propagated), the endpoint hands it the line as text (`write_line`):
    no LogRecord, no caller lookup, which cost more than the line itself. Any other set-up (a
    test's caplog, an operator's handler) gets ordinary records."""

    def __init__(self, stream: Any = None):
        super().__init__(stream)
        self.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))  # as write_line writes

    def write_line(self, line: str) -> None:
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self.stream.write(f"INFO:     {line}\n")
            self.flush()


def _direct() -> AccessLines | None:
    """The access logger's AccessLines, when every line goes to it and nowhere else."""
    handlers = ACCESS.handlers
    if len(handlers) != 1 or ACCESS.propagate or ACCESS.filters:
        return None
    handler = handlers[0]
    if type(handler) is not AccessLines or handler.filters or handler.level > logging.INFO:
        return None
    return handler


def _log_access(scope: dict, outcome: _Outcome, elapsed_s: float) -> None:
    line = f'{scope["method"]} {scope["path"]} {outcome.status} {outcome.backend or "-"} {elapsed_s * 1000:.0f} ms'
    if outcome.reason:
        line += ": " + outcome.reason.replace("\n", " ")[:500]
    direct = _direct()
    if direct is not None:
        direct.write_line(line)
    else:
        ACCESS.info(line)
