"""The OpenAI-compatible backend: wire format and error mapping (a loopback server answering as
each test says, tests/answering.py), then streaming, retries and deadlines against the
simulated server, all over real sockets."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from backends import build_backend
from backends.base import BackendSettings
from backends.errors import (
    AuthError,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    MalformedResponse,
    NotServed,
    RateLimited,
)
from backends.http_errors import parse_retry_after
from backends.openai_http import OpenAIBackend
from backends.types import FinalChunk, Price, Request, TextChunk
from tests.helpers import call
from tests.ports import refusing_port
from tests.waiting import LATE_S

pytestmark = pytest.mark.integration

PROMPT = Request(messages=[{"role": "user", "content": "What is the capital of France?"}])


def _ok_body(text="Paris.", usage=True):
    body = {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    if usage:
        body["usage"] = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    return body


@pytest.fixture
def _mock_backend(answering):
    def build(handler, **settings) -> OpenAIBackend:
        defaults = dict(name="m", model="m", base_url=answering(handler), backoff_initial_s=0.001)
        return OpenAIBackend(BackendSettings(**{**defaults, **settings}))
    return build


async def test_payload_carries_options_params_and_extra(_mock_backend):
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content))
        seen["auth"] = request.headers.get("authorization")
        return httpx.Response(200, json=_ok_body())

    backend = _mock_backend(handler, params={"max_denoising_steps": 48})
    request = Request(messages=PROMPT.messages, max_tokens=64, temperature=0.2, stop=["\n\n"], extra={"seed": 3})
    completion = await backend.complete(request)
    assert completion.text == "Paris."
    assert seen["model"] == "m" and seen["max_tokens"] == 64 and seen["temperature"] == 0.2
    assert seen["stop"] == ["\n\n"] and seen["seed"] == 3 and seen["max_denoising_steps"] == 48
    assert seen["auth"] is None and "stream" not in seen


async def test_key_comes_from_environment_and_is_sent_as_bearer(monkeypatch, _mock_backend):
    monkeypatch.setenv("SIM_TEST_KEY", "k-123")
    seen = {}

    def handler(request):
        seen["auth"] = request.headers["authorization"]
        return httpx.Response(200, json=_ok_body())

    await _mock_backend(handler, api_key_env="SIM_TEST_KEY").complete(PROMPT)
    assert seen["auth"] == "Bearer k-123"


async def test_missing_key_fails_before_any_request(monkeypatch, _mock_backend):
    monkeypatch.delenv("SIM_ABSENT_KEY", raising=False)
    calls = []
    backend = _mock_backend(lambda r: calls.append(r) or httpx.Response(200, json=_ok_body()), api_key_env="SIM_ABSENT_KEY")
    with pytest.raises(AuthError, match="SIM_ABSENT_KEY is not set"):
        await backend.complete(PROMPT)
    assert calls == []


async def test_references_are_read_per_call_and_empty_settings_stay_empty(monkeypatch, _mock_backend):
    """A backend with nothing to fill in skips the walk; one with ${NAME}s still reads the
    environment on every call (a rotated key is seen at once, an unset one refused)."""
    seen = []

    def handler(request):
        seen.append((request.headers.get("x-token"), json.loads(request.content).get("user")))
        return httpx.Response(200, json=_ok_body())

    monkeypatch.setenv("SIM_TEST_KEY", "k-123")
    plain = _mock_backend(handler, api_key_env="SIM_TEST_KEY")
    await plain.complete(PROMPT)
    assert plain.settings.headers == {} and plain.settings.passthrough == {}  # nothing written into them
    referring = _mock_backend(handler, headers={"x-token": "${ROUTE_T_HEADER}"}, passthrough={"user": "${ROUTE_T_USER}"})
    for value in ("first", "second"):
        monkeypatch.setenv("ROUTE_T_HEADER", f"h-{value}")
        monkeypatch.setenv("ROUTE_T_USER", f"u-{value}")
        await referring.complete(PROMPT)
    assert seen[1:] == [("h-first", "u-first"), ("h-second", "u-second")]
    assert referring.settings.headers == {"x-token": "${ROUTE_T_HEADER}"}  # never kept resolved
    monkeypatch.delenv("ROUTE_T_USER")
    with pytest.raises(AuthError, match=r"ROUTE_T_USER is not set; the config of m refers to it as \$\{ROUTE_T_USER\}"):
        await referring.complete(PROMPT)
    assert len(seen) == 3


# 404 naming no field: nothing is served at the configured URL or model (the config's doing, not
# the request's: issue 38), and no retry finds it either.
@pytest.mark.parametrize("status, error", [(400, BadRequest), (401, AuthError), (403, AuthError), (404, NotServed)])
async def test_client_errors_are_never_retried(status, error, _mock_backend):
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(status, json={"error": {"message": "nope"}})

    with pytest.raises(error) as caught:
        await _mock_backend(handler, max_retries=3).complete(PROMPT)
    assert len(calls) == 1
    assert caught.value.status == status and "nope" in caught.value.body


async def test_server_errors_are_retried_then_succeed(_mock_backend):
    statuses = iter([503, 502, 200])

    def handler(request):
        status = next(statuses)
        return httpx.Response(status, json=_ok_body() if status == 200 else {"error": "busy"})

    completion = await call(_mock_backend(handler, max_retries=2), PROMPT)
    assert completion.text == "Paris."


async def test_retries_run_out_and_the_last_error_is_raised(_mock_backend):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(500, text="boom")

    with pytest.raises(BackendUnavailable, match="HTTP 500: boom"):
        await call(_mock_backend(handler, max_retries=2), PROMPT)
    assert len(calls) == 3


async def test_missing_usage_is_estimated_and_flagged(_mock_backend):
    backend = _mock_backend(lambda r: httpx.Response(200, json=_ok_body("a b c d e f g h", usage=False)))
    completion = await backend.complete(PROMPT)
    assert completion.usage.output_tokens > 0 and completion.metadata["usage_estimated"] is True


async def test_cost_is_computed_from_configured_prices(_mock_backend):
    backend = _mock_backend(lambda r: httpx.Response(200, json=_ok_body()), price=Price(3.0, 15.0))
    completion = await backend.complete(PROMPT)
    assert completion.cost_usd == pytest.approx((7 * 3.0 + 2 * 15.0) / 1e6)


async def test_tool_calls_pass_through(_mock_backend):
    body = _ok_body("")
    body["choices"][0]["message"]["tool_calls"] = [{"id": "c1", "type": "function",
                                                    "function": {"name": "f", "arguments": "{}"}}]
    completion = await _mock_backend(lambda r: httpx.Response(200, json=body)).complete(PROMPT)
    assert completion.tool_calls[0]["function"]["name"] == "f"


def test_retry_after_parses_seconds_and_http_dates(monkeypatch):
    import types

    import backends.http_errors

    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(None) is None
    now = 1_800_000_000.0  # the parser's clock, fixed: the answer is exact, however long the test takes
    monkeypatch.setattr(backends.http_errors, "time", types.SimpleNamespace(time=lambda: now))
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert parse_retry_after(future) == 30.0
    past = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 30))
    assert parse_retry_after(past) == 0.0


# -- against the simulated server, over real sockets ------------------------------------------


def _sim_backend(sim, model="sim-model", **settings):
    defaults = dict(name="local", model=model, base_url=sim.base_url, backoff_initial_s=0.01)
    return build_backend("openai", BackendSettings(**{**defaults, **settings}))


async def test_sim_complete_is_labelled_simulated(sim):
    completion = await _sim_backend(sim).complete(PROMPT)
    assert completion.text.startswith("[simulated sim-model]")
    assert completion.metadata["simulated"] is True
    assert completion.usage.input_tokens > 0 and completion.usage.output_tokens > 0
    assert completion.finish_reason in ("stop", "length")


async def test_sim_stream_chunks_add_up_to_the_final_text(sim):
    backend = _sim_backend(sim)
    chunks = [c async for c in backend.stream(PROMPT)]
    assert isinstance(chunks[-1], FinalChunk)
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert text == chunks[-1].completion.text and text.startswith("[simulated")
    assert chunks[-1].completion.usage.output_tokens > 0  # usage came in the stream
    assert chunks[-1].completion.timings.ttft_s is not None


async def test_sim_diffusion_backend_reports_canvases(sim):
    sim.update_profile("diff-model", decoding="diffusion", canvas_s=0.01, answer_tokens=300)
    backend = _sim_backend(sim, model="diff-model", decoding="diffusion", canvas_length=256)
    completion = await backend.complete(PROMPT)
    assert completion.usage.output_tokens == 300
    assert completion.diffusion.canvases == 2


async def test_sim_500_then_ok_is_retried(sim):
    sim.set_faults("sim-model", ["500", "500", None])
    completion = await call(_sim_backend(sim, max_retries=2), PROMPT)
    assert completion.text.startswith("[simulated")
    assert sim.stats("sim-model")["requests"] == 3


async def test_sim_429_honours_retry_after(sim):
    sim.update_profile("sim-model", retry_after_s=0.3)
    sim.set_faults("sim-model", ["429", None])
    started = time.perf_counter()
    completion = await call(_sim_backend(sim), PROMPT)
    assert completion.text and time.perf_counter() - started >= 0.3


async def test_sim_429_beyond_the_deadline_is_not_waited_for(sim):
    sim.update_profile("sim-model", retry_after_s=30)
    sim.set_faults("sim-model", ["429", None])
    started = time.perf_counter()
    with pytest.raises(RateLimited) as caught:
        await call(_sim_backend(sim, timeout_s=2.0), PROMPT.with_options(timeout_s=2.0))
    assert caught.value.retry_after == 30 and time.perf_counter() - started < 2.0 + LATE_S  # not the 30 s asked for
    assert sim.stats("sim-model")["requests"] == 1  # and no second try past the deadline


async def test_sim_hang_is_cut_at_the_deadline(sim):
    sim.set_faults("sim-model", ["hang", "hang", "hang"])
    started = time.perf_counter()
    with pytest.raises(BackendTimeout):
        await call(_sim_backend(sim, max_retries=2), Request(messages=PROMPT.messages, timeout_s=0.5))
    assert time.perf_counter() - started < 0.5 + LATE_S  # the hang lasts forever


async def test_sim_stream_hang_is_cut_at_the_deadline(sim):
    sim.set_faults("sim-model", ["hang"])
    started = time.perf_counter()
    with pytest.raises(BackendTimeout):
        async for _ in _sim_backend(sim, max_retries=0).stream(Request(messages=PROMPT.messages, timeout_s=0.4)):
            pass
    assert time.perf_counter() - started < 0.4 + LATE_S  # the hang lasts forever


async def test_sim_slow_drip_is_cut_at_the_deadline(sim):
    sim.update_profile("sim-model", drip_interval_s=0.2, answer_tokens=100)
    sim.set_faults("sim-model", ["drip"])
    got = []
    started = time.perf_counter()
    with pytest.raises(BackendTimeout, match="stalled past the deadline"):
        async for chunk in _sim_backend(sim).stream(Request(messages=PROMPT.messages, timeout_s=0.7)):
            got.append(chunk)
    elapsed = time.perf_counter() - started
    assert 0.6 < elapsed < 0.7 + LATE_S and got, "some tokens arrived before the deadline cut the stream"


async def test_sim_drop_mid_stream_raises_unavailable_after_partial_text(sim):
    sim.set_faults("sim-model", ["drop"])
    got = []
    with pytest.raises(BackendUnavailable):
        async for chunk in _sim_backend(sim).stream(PROMPT):
            got.append(chunk)
    assert not any(isinstance(c, FinalChunk) for c in got)


@pytest.mark.parametrize("stream", [False, True])
async def test_sim_malformed_answer_is_reported(sim, stream):
    sim.set_faults("sim-model", ["malformed"])
    backend = _sim_backend(sim, max_retries=0)
    with pytest.raises(MalformedResponse):
        if stream:
            async for _ in backend.stream(PROMPT):
                pass
        else:
            await backend.complete(PROMPT)


async def test_connection_refused_is_unavailable():
    with refusing_port() as port:
        backend = build_backend("openai", BackendSettings(name="gone", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                                                          max_retries=1, backoff_initial_s=0.01))
        with pytest.raises(BackendUnavailable, match="cannot connect"):
            await backend.complete(PROMPT)


async def test_streams_reuse_one_pooled_connection(_mock_backend):
    peers = []

    def handler(request: httpx.Request) -> httpx.Response:
        peers.append(request.headers["x-peer-port"])
        event = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        # a blank keep-alive line after [DONE]: the body must still be read to its end
        body = f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n: keep-alive\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    backend = _mock_backend(handler)
    for _ in range(3):
        assert "".join([c.text async for c in backend.stream(PROMPT) if isinstance(c, TextChunk)]) == "hi"
    await backend.aclose()
    # the connection is kept only when the body was read to its end after [DONE]
    assert len(peers) == 3 and len(set(peers)) == 1, peers


async def test_events_that_arrive_together_come_up_as_one_chunk_of_each_kind(_mock_backend):
    """One read of several events: one chunk per kind, not one per token, for every layer above
    (and the client's socket) to handle; drafts are never merged, each replaces the last."""
    def handler(request: httpx.Request) -> httpx.Response:
        deltas = [{"reasoning_content": "a"}, {"reasoning_content": "b"}, {"content": "The "}, {"content": "sky"}]
        events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    backend = _mock_backend(handler)
    chunks = [c async for c in backend.stream(PROMPT)]
    await backend.aclose()
    assert [(c.kind, c.text) for c in chunks[:-1]] == [("thinking", "ab"), ("text", "The sky")]
    assert isinstance(chunks[-1], FinalChunk) and chunks[-1].completion.text == "The sky"


def test_merged_keeps_drafts_apart_and_joins_runs_of_a_kind():
    from backends.base import merged
    from backends.types import DraftChunk, ThinkingChunk

    chunks = [ThinkingChunk("x"), TextChunk("a"), TextChunk("b"), DraftChunk("d1", step=1), DraftChunk("d2", step=2),
              TextChunk("c")]
    assert merged(chunks) == [ThinkingChunk("x"), TextChunk("ab"), DraftChunk("d1", step=1),
                              DraftChunk("d2", step=2), TextChunk("c")]


async def test_diffusion_decode_rate_is_over_the_whole_generation(sim):
    # One canvas arrives in one piece: a rate "after the first token" would divide by ~0 s.
    sim.update_profile("canvas-model", decoding="diffusion", canvas_s=0.1, ttft_s=0.0, answer_tokens=100)
    backend = _sim_backend(sim, model="canvas-model", decoding="diffusion")
    chunks = [c async for c in backend.stream(PROMPT)]
    timings = chunks[-1].completion.timings
    assert timings.ttft_s is not None and timings.ttft_s >= 0.09
    assert 100 / (timings.total_s + 0.01) < timings.decode_tps < 100 / 0.09  # ~1,000 tok/s, not ~1e5
