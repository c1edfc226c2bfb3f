"""Helpers shared by test modules (no test module imports another)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from backends.base import BackendSettings
from backends.deadline import Deadline
from backends.fake import FakeBackend, FakeStep
from backends.types import Completion, Request, Timings, Usage
from policies.breaker import BreakerBoard
from policies.latency import LatencyModel
from policies.selection import Candidate, Plan
from router import Router
from router.calls import CallOptions, CallPath
from router.config_loader import load_config, parse_config
from router.consortium.consortium import Consortium
from router.consortium.simulated import arbiter_responder
from router.consortium.spec import ConsortiumConfig
from router.decision import Attempt, Decision, Outcome, RouteResult

__all__ = ["WEATHER_CALL", "adapter_config", "arbiter", "ask", "build", "call", "calls", "fake", "make_router",
           "require_package", "router_for", "sim_count", "use_arbiter"]


async def call(backend, request: Request) -> Completion:
    """One call to `backend` through a call path of its own (retries, deadline), as the router makes it."""
    path = CallPath({backend.name: backend}.__getitem__, breakers=BreakerBoard(time.monotonic))
    return await path.complete(backend.name, request, CallOptions(deadline=Deadline(request.timeout_s)))


def fake(name: str, steps: list[FakeStep] | None = None, responder=None, *, max_retries: int = 2) -> FakeBackend:
    return FakeBackend(BackendSettings(name=name, model=name, max_retries=max_retries), steps=steps,
                       responder=responder)


def build(backends: dict, consortia: dict[str, dict], *, max_concurrency: int = 128) -> dict:
    """Consortia resolving names through one shared dict and calling through one CallPath, as a
    Router does."""
    registry = dict(backends)
    path = CallPath(registry.__getitem__, breakers=BreakerBoard(time.monotonic), max_concurrency=max_concurrency)
    for name, spec in consortia.items():
        registry[name] = Consortium(name, ConsortiumConfig.model_validate(spec), resolve=registry.__getitem__,
                                    calls=path)
    return registry


def ask(text: str = "What is 2+2?") -> Request:
    return Request(messages=[{"role": "user", "content": text}])


def arbiter(**kw) -> FakeBackend:
    return fake("arb", responder=lambda req: arbiter_responder(**kw)(req.messages))


def calls(*backends: FakeBackend) -> int:
    return sum(len(b.calls) for b in backends)


def use_arbiter(sim, model: str = "mercury-2", **kw) -> list[int]:
    """Make the simulated `model` answer arbiter prompts in our format; returns the list that
    records how many candidate blocks each prompt held."""
    seen: list[int] = []
    state = sim.app.state.sim
    state.profiles[model] = dataclasses.replace(state.profile(model), responder=arbiter_responder(seen=seen, **kw))
    return seen



def router_for(sim, consortia: str) -> Router:
    text = f"""\
backends:
  glm-5.2: {{kind: openai, model: glm-5.2, base_url: "{sim.base_url}", price: {{input: 0.6, output: 2.2}}}}
  k2.6: {{kind: openai, model: k2.6, base_url: "{sim.base_url}"}}
  mercury-2: {{kind: openai, model: mercury-2, base_url: "{sim.base_url}", price: {{input: 0.25, output: 0.75}}}}
routing:
  tiers: [{{name: all, backends: [glm-5.2]}}]
consortia:
{consortia}"""
    return Router(parse_config(text, "sim.yaml"))


def cli_config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    """A config file of two tiers on one upstream (`local`, then `hosted`, priced), routed by
    prompt length (100 characters), for the CLI's tests; `extra` is YAML appended as written."""
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(f"""\
        backends:
          local:
            kind: openai
            model: sim-local
            base_url: {base_url}
          hosted:
            kind: openai
            model: sim-hosted
            base_url: {base_url}
            price: {{input: 3, output: 15}}
        routing:
          scorer: {{kind: length, threshold_chars: 100}}
          tiers:
            - {{name: cheap, below: 0.5, backends: [local]}}
            - {{name: strong, backends: [hosted]}}
        """) + extra)
    return path


def make_router(sim, *, timeout_s: float = 10.0, **top) -> Router:
    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, "timeout_s": timeout_s}

    config = {
        "backends": {"small": backend("m-small"), "big": backend("m-big"), "slow": backend("m-slow"),
                     "glm": backend("glm-5.2"), "arbiter": backend("mercury-2"),
                     "offline": {"kind": "fake", "model": "fake-1"}},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 200},
                    "tiers": [{"name": "low", "below": 0.5, "backends": ["small"]},
                              {"name": "high", "backends": ["big"]}]},
        "consortia": {"pair": {"members": ["glm*2"], "arbiter": "arbiter", "judging": "rank"}},
        **top,
    }
    return Router(load_config(config), source="server")


TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}}


class ToolUpstream:
    """Records each request body; answers with one tool call."""

    def __init__(self):
        self.bodies: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw)
        self.bodies.append(body)
        if body.get("stream"):
            head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
            pieces = [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": ""}},
                      {"index": 0, "function": {"arguments": '{"tz": '}},
                      {"index": 0, "function": {"arguments": '"UTC"}'}}]
            events = [{**head, "choices": [{"index": 0, "delta": {"tool_calls": [p]}, "finish_reason": None}]}
                      for p in pieces]
            events.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
            out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            content_type = b"text/event-stream"
        else:
            out = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "tool_calls",
                                           "message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}],
                              "usage": {"prompt_tokens": 5, "completion_tokens": 7}}).encode()
            content_type = b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", content_type)]})
        await send({"type": "http.response.body", "body": out})


@contextlib.contextmanager
def tool_upstream() -> Iterator[ToolUpstream]:
    """A ToolUpstream served on a free loopback port; `.base_url` says where."""
    app = ToolUpstream()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.005)
    app.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    try:
        yield app
    finally:
        server.should_exit = True
        thread.join(timeout=5)


class PaidUpstream:
    """A real, not simulated, OpenAI-compatible upstream for `answering`: every chat completion
    is "paid answer" with usage 5+7 tokens; the bodies are recorded. For what must tell a real
    answer from a simulated one (the spend cap counts only real ones)."""

    def __init__(self):
        self.bodies: list[dict] = []

    def __call__(self, request):
        import httpx

        body = json.loads(request.content)
        self.bodies.append(body)
        return httpx.Response(200, json={
            "id": "paid", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "paid answer"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7}})


def ok_chat_answer(body: dict[str, Any]) -> httpx.Response:
    """An OpenAI chat completion saying "ok", whole or streamed as `body` asks: an upstream's
    answer for tests about what reached it."""
    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    head = {"id": "chatcmpl-1", "created": 0, "model": body.get("model", "m")}
    if not body.get("stream"):
        return httpx.Response(200, json={**head, "object": "chat.completion", "usage": usage, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})
    chunk = {**head, "object": "chat.completion.chunk"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}]
    data = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})


class Watched:
    """A request's watch (router/decision.py `Watch`) that keeps what it is told."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self.refusals: list[str] = []
        self.outcomes: list[Outcome] = []

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None:
        self.attempts.append(attempt)

    def refused(self, backend: str) -> None:
        self.refusals.append(backend)

    def finished(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)


def decision() -> Decision:
    """A two-candidate decision, for records that need one."""
    prediction = LatencyModel().predict()
    plan = Plan((Candidate("a", "low", prediction, 0.0, True, "closed"),
                 Candidate("b", "low", prediction, 0.0, True, "closed")), "test")
    return Decision(plan=plan, reason="test", tier="low")


def ok_outcome(prompt: object) -> Outcome:
    """A successful request's outcome whose prompt is `prompt` (maybe malformed)."""
    completion = Completion(text="fine", backend="a", model="m", usage=Usage(3, 5), timings=Timings(0.1, 0.2, 50.0))
    return Outcome(decision(), [{"role": "user", "content": prompt}], "server", 0.2,
                   result=RouteResult(completion, decision(), ()))


async def sim_count(sim, model: str, key: str, want: int, timeout_s: float = 5.0) -> dict:
    """The simulator's counts for `model` once `key` reached `want` (or after `timeout_s`): it
    counts a cancelled request when that request's task ends, on the server's own thread."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    while (stats := sim.stats(model))[key] < want and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return stats


def adapter_config(sim) -> dict:
    """Two tiers and a ranked consortium on the simulator, for the framework adapters' tests."""
    def backend(model: str, price: tuple[float, float]) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, "timeout_s": 30,
                "price": {"input": price[0], "output": price[1]}}

    return {
        "backends": {"light": backend("sim-light", (0.1, 0.4)), "heavy": backend("sim-heavy", (3, 15)),
                     "judge": backend("sim-judge", (0.25, 0.75))},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 400},
                    "tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                              {"name": "heavy", "backends": ["heavy"]}]},
        "consortia": {"panel": {"members": ["light", "heavy"], "arbiter": "judge", "judging": "rank"}},
        "log": {"enabled": False},
    }


WEATHER_CALL = {"tool_calls": [{"id": "call_w1", "name": "get_weather", "arguments": {"city": "Paris"}}]}


def require_package(module: str, extra: str):
    """`module` imported, or skip (fail under CI, which installs every extra) naming the extra."""
    import importlib
    import os

    import pytest

    try:
        return importlib.import_module(module)
    except ImportError:
        message = f'needs {module}: pip install -e ".[{extra}]"'
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run these tests; .ci/run installs the extra)", pytrace=False)
        pytest.skip(message, allow_module_level=True)


def capped_config(tmp_path: Path, upstream: PaidUpstream, cap_usd: float = 0.000001, **spend: Any) -> dict:
    """A config of the one `paid` backend, its request log under `tmp_path`, and a spend cap."""
    return {"backends": {"paid": {"kind": "openai", "model": "m-paid", "base_url": upstream.base_url, "max_retries": 0,
                                  "price": {"input": 5.0, "output": 15.0}}},
            "routing": {"tiers": [{"name": "only", "backends": ["paid"]}]},
            "log": {"path": str(tmp_path / "route.db")}, "spend": {"cap_usd": cap_usd, **spend}}
