"""The simulated OpenAI-compatible server: a raw Starlette ASGI app.

Chat completions are a plain ASGI callable (no Request/Response objects) because benchmarks
time the router, not the simulator: a zero-delay profile must cost well under a millisecond.

    POST /v1/chat/completions   OpenAI wire format, stream and non-stream
    POST /v1/chat/completions   with `"diffusing": true`, a diffusion profile streams Mercury's drafts
    POST /v1/messages           the same answers in Anthropic's Messages format (simulator/anthropic.py)
    GET  /v1/models             every profiled model, owned_by "simulated"; unless the app is
                                strict about names, `x-sim-any-model: true` says others are answered too
    GET  /healthz
    (a profile's `refuses`: requests carrying those fields are refused as the provider would: refusals.py)
    POST /sim/faults            {"model", "sequence": ["500", null, ...]}  one per request
    POST /sim/script            {"model", "replies": [...]}  exact replies, cycling; a reply is a string
                                or {"content", "tool_calls": [{"name", "arguments"}]} (simulator/tools.py)
    POST /sim/profiles          {"model", <SimProfile fields>}  change a profile at runtime
    GET  /sim/stats             per-model requests, completed, in_flight, peak_in_flight, cancelled, faults
    POST /sim/reset             back to the starting profiles; no faults, scripts or stats

With `strict_models=True` an unprofiled model name is answered 404, exactly as vLLM answers a name
it was not started with; otherwise any name gets a fast default profile.

A request's fault comes from the `x-sim-fault` header, else the next queued one, else the
profile. Every response carries `x-simulated: true`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backends.errors import ConfigError
from backends.openai_chunks import DONE, ChunkWriter
from backends.simulator.answers import Answer, finish, generate, prompt_tokens, with_thought, with_tool_calls
from backends.simulator.anthropic import Messages
from backends.simulator.drafts import drafts
from backends.simulator.profiles import DEFAULT_PROFILES, FALLBACK_PROFILE, FAULT_KINDS, SimProfile
from backends.simulator.prompt_cache import PromptCache
from backends.simulator.refusals import refusal_body, refused_field
from backends.simulator.thinking import Signer
from backends.simulator.tools import Reply, argument_pieces, check_reply, split_reply

__all__ = ["SimState", "create_app"]

_LOG = logging.getLogger("uvicorn.error")  # uvicorn configures this one; ours would be silent
_FINGERPRINT = "simulated"
_LABEL = (b"x-simulated", b"true")
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_STAT_KEYS = ("requests", "completed", "in_flight", "peak_in_flight", "cancelled", "faults")


class SimState:
    """Everything the control endpoints change. Lives on one event loop: no locks needed."""

    def __init__(self, profiles: Mapping[str, SimProfile] | None = None, *, strict_models: bool = False):
        self._initial = dict(DEFAULT_PROFILES if profiles is None else profiles)
        self.strict_models = strict_models
        self.signer = Signer()  # signs the simulated Anthropic thinking (simulator/thinking.py)
        self.reset()

    def reset(self) -> None:
        self.profiles: dict[str, SimProfile] = dict(self._initial)
        self.scripts: dict[str, list[Reply]] = {}
        self.faults: dict[str, deque[str | None]] = {}
        self.turns: Counter[str] = Counter()  # replies handed out per model, for cycling
        self.caches: dict[str, PromptCache] = {}  # per model, when its profile caches prompts
        self.stats: dict[str, Counter[str]] = {}

    def profile(self, model: str) -> SimProfile:
        return self.profiles.get(model, FALLBACK_PROFILE)

    def count(self, model: str, key: str, delta: int = 1) -> int:
        stats = self.stats.setdefault(model, Counter())
        stats[key] += delta
        if key == "in_flight":
            stats["peak_in_flight"] = max(stats["peak_in_flight"], stats[key])
        return stats[key]

    def choose_fault(self, model: str, header: str | None, number: int) -> str | None:
        """The header wins; otherwise a queued fault is consumed; otherwise the profile's."""
        if header:
            return header
        queue = self.faults.get(model)
        if queue:
            return queue.popleft()
        return self.profile(model).faults_request(number)

    def scripted_reply(self, model: str, messages: list[dict[str, Any]]) -> Reply | None:
        profile = self.profile(model)
        scripted = self.scripts.get(model)
        if scripted is None and profile.responder is not None:
            # A responder may decline (None): `route sim`'s judge answers arbiter prompts only.
            reply = profile.responder(messages)
            if reply is not None:
                return reply
        replies: Sequence[Reply] | None = scripted or profile.replies
        if not replies:
            return None
        turn = self.turns[model]
        self.turns[model] += 1
        return replies[turn % len(replies)]

    def stats_view(self) -> dict[str, dict[str, int]]:
        return {m: {k: c[k] for k in _STAT_KEYS} for m, c in self.stats.items()}


class _Client:
    """Waits that end early when the client goes away (http.disconnect from the server)."""

    def __init__(self, receive: Any):
        self._receive = receive
        self._gone = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None
        self.t0 = time.perf_counter()  # seconds; every delay is measured from here

    @property
    def gone(self) -> bool:
        return self._gone.is_set()

    async def sleep_until(self, offset_s: float) -> bool:
        """Sleep until `offset_s` after the request began; False if the client left first."""
        due = self.t0 + offset_s
        # A loop's timer may fire a little before its time (uvloop keeps a cached, millisecond
        # clock), and a profile's schedule is a promise of "never sooner": sleep out the rest.
        while (delay := due - time.perf_counter()) > 0 and not self.gone:
            self._watch()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._gone.wait()
        return not self.gone

    async def wait_gone(self) -> None:
        self._watch()
        await self._gone.wait()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch_disconnect())

    async def _watch_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self._gone.set()


class ChatCompletions:
    """POST /v1/chat/completions as a raw ASGI app."""

    def __init__(self, state: SimState):
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            body = json.loads(await _read_body(receive))
            model, messages = _validate(body)
            header = _fault_header(scope)
        except (ValueError, TypeError) as exc:
            await _send_json(send, 400, _error(str(exc), "invalid_request_error"))
            return
        state = self.state
        if state.strict_models and model not in state.profiles:
            # vLLM's answer, word for word, to a name it was not started with.
            await _send_json(send, 404, {"error": {"message": f"The model `{model}` does not exist.",
                                                   "type": "NotFoundError", "param": "model", "code": 404}})
            return
        number = state.count(model, "requests")
        state.count(model, "in_flight")
        client = _Client(receive)
        outcome = "cancelled"
        try:
            profile = state.profile(model)
            field = refused_field(profile.refuses, body, scope["headers"]) if profile.refuses else None
            if field is not None:  # as its provider would, before any fault: the request's shape decides
                status, refusal = refusal_body(field, profile.refusal, anthropic=False)
                await _send_json(send, status, refusal)
                outcome = "completed"
                return
            fault = state.choose_fault(model, header, number)
            if fault is not None:
                state.count(model, "faults")
            if fault == "echo-key":
                outcome = await _echo_credential(scope, send)
            else:
                outcome = await self._respond(client, send, body, model, messages, fault)
        finally:
            client.close()
            state.count(model, "in_flight", -1)
            state.count(model, outcome)

    async def _respond(self, client, send, body, model, messages, fault) -> str:
        """Send the answer (or the fault); returns the stats key to count."""
        profile = self.state.profile(model)
        if fault == "500":
            await _send_json(send, 500, _error("simulated internal server error", "server_error"))
            return "completed"
        if fault == "429":
            retry = profile.retry_after_s
            headers = [(b"retry-after", f"{retry:g}".encode()),
                       (b"retry-after-ms", str(round(retry * 1000)).encode())]
            await _send_json(send, 429, _error("simulated rate limit", "rate_limit_error"), headers)
            return "completed"
        if fault == "hang":
            await client.wait_gone()
            return "cancelled"
        answer = self._answer(body, model, messages, profile)
        if body.get("stream") and body.get("diffusing") and profile.decoding == "diffusion" and fault is None:
            return await _stream_drafts(client, send, body, model, answer, profile)
        if body.get("stream"):
            return await _stream(client, send, body, model, answer, profile, fault)
        return await _complete(client, send, model, answer, profile, fault)

    def _answer(self, body, model, messages, profile: SimProfile) -> Answer:
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        turn = self.state.turns[model]
        reply = self.state.scripted_reply(model, messages)
        text, calls = (None, []) if reply is None else split_reply(reply, turn)
        if text is None:
            temperature = body.get("temperature")
            # 1 and 1.0 are the same request, whichever way a client serialises it.
            temperature = float(temperature) if isinstance(temperature, (int, float)) else None
            text = generate(model, messages, profile.answer_tokens,
                            seed=body.get("seed"), temperature=temperature)
            text = with_thought(text, model, messages, profile.thinking_tokens)
        answer = with_tool_calls(finish(text, max_tokens, stop, prompt_tokens(messages)), calls)
        if profile.prompt_cache_ttl_s > 0:
            cache = self.state.caches.setdefault(model, PromptCache())
            answer = replace(answer, cached_tokens=cache.read(messages, profile.prompt_cache_ttl_s, time.monotonic()))
        return answer


async def _complete(client, send, model, answer: Answer, profile: SimProfile, fault) -> str:
    n = answer.completion_tokens
    if fault == "drip":
        done_s = profile.first_token_s() + max(0, n - 1) * profile.drip_interval_s
    elif fault == "drop":
        done_s = profile.ttft_s
    else:
        done_s = profile.total_s(n)
    if not await client.sleep_until(done_s):
        return "cancelled"
    if fault == "drop":
        await _drop(client, send, started=False)
        return "completed"
    if fault == "malformed":
        broken = b'{"id": "chatcmpl-simulated", "object": "chat.completion", "choices": [{"mess'
        await _send_bytes(send, 200, broken, [(b"content-type", b"application/json")])
        return "completed"
    await _send_json(send, 200, _completion_body(model, answer))
    return "completed"


async def _stream(client, send, body, model, answer: Answer, profile: SimProfile, fault) -> str:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunk = _chunk_writer(model, include_usage)
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    # A drop or malformed line comes partway through, after some good chunks.
    cut = max(1, len(answer.tokens) // 2) if fault in ("drop", "malformed") else None
    if not await _send_tokens(client, send, chunk, answer.tokens[:cut], profile, fault):
        return "cancelled"
    if fault == "drop":
        await _drop(client, send, started=True)
        return "completed"
    if fault == "malformed":
        bad = b'data: {"id": "chatcmpl-simulated", "choices": [{"delta": {"content": \n\n'
        await send({"type": "http.response.body", "body": bad + b"data: [DONE]\n\n"})
        return "completed"
    if answer.tool_calls and not await _send_tool_calls(client, send, chunk, answer, profile):
        return "cancelled"
    tail = [chunk.finish(answer.finish_reason)]
    if include_usage:
        tail.append(chunk.usage(_usage(answer)))
    tail.append(DONE)
    await send({"type": "http.response.body", "body": b"".join(tail)})
    return "completed"


async def _stream_drafts(client, send, body, model, answer: Answer, profile: SimProfile) -> str:
    """Mercury's `diffusing` mode: each event holds the whole draft so far (simulator/drafts.py)."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunk = _chunk_writer(model, include_usage)
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    await send({"type": "http.response.body", "body": chunk.role(), "more_body": True})
    for due_s, draft in drafts(answer.tokens, profile):
        if not await client.sleep_until(due_s):
            return "cancelled"
        await send({"type": "http.response.body", "body": chunk.content(draft), "more_body": True})
    tail = [chunk.finish(answer.finish_reason)]
    if include_usage:
        tail.append(chunk.usage(_usage(answer)))
    await send({"type": "http.response.body", "body": b"".join([*tail, DONE])})
    return "completed"


async def _send_tokens(client, send, chunk, tokens: list[str], profile: SimProfile, fault) -> bool:
    """The role chunk, then content as it comes due; False if the client left first."""
    # A diffusion canvas, or tokens batched by `stream_interval_s`, land in one event.
    whole_canvases = (profile.decoding == "diffusion" or profile.stream_interval_s > 0) and fault != "drip"
    for i, (due_s, group) in enumerate(_schedule(tokens, profile, fault)):
        if not await client.sleep_until(due_s):
            return False
        events = [chunk.role()] if i == 0 else []
        if whole_canvases and group:
            events.append(chunk.content("".join(group)))  # a canvas lands in one piece
        else:
            events.extend(chunk.content(t) for t in group)
        await send({"type": "http.response.body", "body": b"".join(events), "more_body": True})
    return not client.gone


async def _send_tool_calls(client, send, chunk, answer: Answer, profile: SimProfile) -> bool:
    """The calls' pieces, each in its own event and paced like the tokens after the text (a
    model writes arguments token by token), as providers stream them; False if the client left."""
    first = len(answer.tokens)
    pieces = argument_pieces(list(answer.tool_calls))
    for due_s, group in itertools.groupby(enumerate(pieces), key=lambda item: profile.arrival_s(first + item[0])):
        if not await client.sleep_until(due_s):
            return False
        await send({"type": "http.response.body", "body": b"".join(chunk.delta({"tool_calls": [p]}) for _, p in group),
                    "more_body": True})
    return True


def _schedule(tokens: list[str], profile: SimProfile, fault):
    """Tokens grouped by arrival time: (seconds after the request, tokens due then). An empty
    answer still has one (empty) group, when its role chunk is due."""
    if not tokens:
        yield profile.first_token_s(), []
        return
    group: list[str] = []
    due = None
    first: float | None = None  # due time of the group's first token
    for i, token in enumerate(tokens):
        if fault == "drip":
            at = profile.first_token_s() + i * profile.drip_interval_s
        else:
            at = profile.arrival_s(i)
        if group and at != due and (first is None or at - first >= profile.stream_interval_s):
            yield due, group
            group = []
            first = None
        due = at
        first = at if first is None else first
        group.append(token)
    yield due, group


def _chunk_writer(model: str, include_usage: bool) -> ChunkWriter:
    """OpenAI's chunks, as OpenAI writes them: a fingerprint, and an explicit null usage until
    the last chunk when usage was asked for."""
    fields: dict[str, Any] = {"system_fingerprint": _FINGERPRINT, **({"usage": None} if include_usage else {})}
    return ChunkWriter(model, completion_id=f"chatcmpl-sim-{uuid.uuid4().hex[:24]}", fields=fields)


def _envelope(model: str, obj: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-sim-{uuid.uuid4().hex[:24]}",
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": _FINGERPRINT,
    }


def _completion_body(model: str, answer: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None, "refusal": None}
    if answer.tool_calls:
        message["tool_calls"] = list(answer.tool_calls)
    else:
        message["content"] = answer.text
    choice = {"index": 0, "message": message, "logprobs": None,
              "finish_reason": answer.finish_reason}
    return {**_envelope(model, "chat.completion"), "choices": [choice], "usage": _usage(answer)}


def _usage(answer: Answer) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }
    if answer.cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": answer.cached_tokens}
    return usage


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


async def _drop(client: _Client, send, *, started: bool) -> None:
    """Abort the TCP connection. uvicorn gives ASGI no way to do this, so we reach the
    transport through its bound `receive`; without it, ending the app mid-response makes
    uvicorn close the connection anyway (after logging the incomplete response)."""
    cycle = getattr(client._receive, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is not None:
        transport.close()
        # Let connection_lost run, so uvicorn sees a disconnect rather than an app bug.
        for _ in range(20):
            if getattr(cycle, "disconnected", True):
                return
            await asyncio.sleep(0.001)
        return
    if not started:
        head = [(b"content-type", b"application/json"), (b"content-length", b"100")]
        await send({"type": "http.response.start", "status": 200, "headers": head})


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


async def _send_bytes(send, status: int, body: bytes, headers: list) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_json(send, status: int, obj: Any, headers: list | None = None) -> None:
    head = [(b"content-type", b"application/json"), *(headers or [])]
    await _send_bytes(send, status, _dumps(obj), head)


async def _read_body(receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ValueError("client disconnected before sending the body")
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


def _validate(body: Any) -> tuple[str, list[dict[str, Any]]]:
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        raise ValueError("'model' is required")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("'messages' must be a list of objects")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError("'max_tokens' must be a positive integer")
    return model, messages


async def _echo_credential(scope: Any, send: Any) -> str:
    sent = {name: value.decode("latin-1") for name, value in scope["headers"]}
    key = sent.get(b"authorization", "").removeprefix("Bearer ") or scope.get("query_string", b"").decode()
    message = f"Incorrect API key provided: {key}. You can find your API key at the provider's console."
    await _send_json(send, 401, _error(message, "invalid_request_error"))
    return "completed"


def _fault_header(scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-sim-fault":
            fault = value.decode().strip().lower()
            if fault not in FAULT_KINDS:
                raise ValueError(f"x-sim-fault must be one of {sorted(FAULT_KINDS)}")
            return fault
    return None


# Control endpoints: rarely called, so plain Starlette requests are fine.

async def _models(request: Request) -> JSONResponse:
    state = request.app.state.sim
    data = [{"id": n, "object": "model", "created": 0, "owned_by": "simulated"} for n in sorted(state.profiles)]
    headers = {} if state.strict_models else {"x-sim-any-model": "true"}
    return JSONResponse({"object": "list", "data": data}, headers=headers)


async def _healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "simulated": True})


async def _set_faults(request: Request) -> JSONResponse:
    model, body = await _control_body(request)
    sequence = body.get("sequence")
    if not isinstance(sequence, list) or any(
        f is not None and str(f) not in FAULT_KINDS for f in sequence
    ):
        return _bad(f"'sequence' must list faults from {sorted(FAULT_KINDS)} or null")
    faults = [None if f is None else str(f) for f in sequence]
    request.app.state.sim.faults.setdefault(model, deque()).extend(faults)
    return JSONResponse({"model": model, "queued": len(request.app.state.sim.faults[model])})


async def _set_script(request: Request) -> JSONResponse:
    model, body = await _control_body(request)
    replies = body.get("replies")
    if not isinstance(replies, list):
        return _bad("'replies' must be a list of strings or {content, tool_calls} objects")
    problem = next((p for p in map(check_reply, replies) if p), None)
    if problem:
        return _bad(f"'replies': {problem}")
    state: SimState = request.app.state.sim
    state.scripts[model] = replies
    state.turns[model] = 0
    return JSONResponse({"model": model, "replies": len(replies)})


async def _update_profile(request: Request) -> JSONResponse:
    model, body = await _control_body(request)
    body.pop("model")
    state: SimState = request.app.state.sim
    try:
        state.profiles[model] = state.profile(model).updated(**body)
    except (ConfigError, TypeError) as exc:
        return _bad(str(exc))
    return JSONResponse({"model": model, "profile": _public_fields(state.profiles[model])})


async def _stats(request: Request) -> JSONResponse:
    return JSONResponse({"models": request.app.state.sim.stats_view()})


async def _reset(request: Request) -> JSONResponse:
    request.app.state.sim.reset()
    return JSONResponse({"reset": True})


async def _control_body(request: Request) -> tuple[str, dict[str, Any]]:
    body = await request.json()
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise _BadControl("body must be a JSON object with a 'model' string")
    return body["model"], body


class _BadControl(Exception):
    pass


def _bad(message: str) -> JSONResponse:
    return JSONResponse(_error(message, "invalid_request_error"), status_code=400)


def _public_fields(profile: SimProfile) -> dict[str, Any]:
    fields = {k: getattr(profile, k) for k in profile.__dataclass_fields__ if k != "responder"}
    fields["replies"] = list(profile.replies) if profile.replies is not None else None
    return fields


async def _on_bad_control(request: Request, exc: Exception) -> JSONResponse:
    return _bad(str(exc) or "invalid JSON body")


class _Labelled:
    """Adds `x-simulated: true` to every response, errors and 404s included."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def labelled_send(message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), _LABEL]
            await send(message)

        await self.app(scope, receive, labelled_send)


def create_app(profiles: Mapping[str, SimProfile] | None = None, *, strict_models: bool = False) -> Starlette:
    """The ASGI app. `profiles` replaces DEFAULT_PROFILES; unknown models get a fast default, or a 404
    with `strict_models`. `app.state.sim` is the SimState, for in-process inspection."""
    state = SimState(profiles, strict_models=strict_models)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        _LOG.info("SIMULATED model server: every answer is synthetic, not from a real model "
                  "(%d profiled models; any other name gets a fast default)", len(state.profiles))
        yield

    chat = ChatCompletions(state)
    routes = [
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/messages", Messages(chat), methods=["POST"]),
        Route("/v1/models", _models),
        Route("/healthz", _healthz),
        Route("/sim/faults", _set_faults, methods=["POST"]),
        Route("/sim/script", _set_script, methods=["POST"]),
        Route("/sim/profiles", _update_profile, methods=["POST"]),
        Route("/sim/stats", _stats),
        Route("/sim/reset", _reset, methods=["POST"]),
    ]
    handlers = {_BadControl: _on_bad_control, json.JSONDecodeError: _on_bad_control}
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    app.state.sim = state
    app.add_middleware(_Labelled)
    return app
