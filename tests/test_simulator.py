"""The simulated OpenAI-compatible server, through real sockets, httpx, openai and litellm."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from backends.errors import ConfigError
from backends.simulator import (
    DEFAULT_PROFILES,
    FALLBACK_PROFILE,
    SimProfile,
    SimServer,
    load_profiles,
)
from backends.simulator.answers import split_tokens
from tests.waiting import LATE_S, eventually

pytestmark = pytest.mark.unit

USER = [{"role": "user", "content": "Explain block diffusion in one short paragraph please"}]
# A timer may fire up to the loop's clock resolution early; the bounds below are lower bounds,
# which a busy machine can only exceed, so this is all the tolerance they need.
_TIMER_SLACK_S = 0.01


@pytest.fixture
def client(sim):
    with httpx.Client(base_url=sim.base_url, trust_env=False, timeout=5.0) as c:
        yield c


def chat(client, model="test-model", messages=USER, headers=None, timeout=5.0, **fields):
    return client.post("/chat/completions", json={"model": model, "messages": messages, **fields},
                       headers=headers, timeout=timeout)


def stream_events(client, model="test-model", messages=USER, headers=None, **fields):
    """Every SSE `data:` payload with its arrival time (seconds after sending)."""
    body = {"model": model, "messages": messages, "stream": True, **fields}
    start = time.perf_counter()
    events = []
    with client.stream("POST", "/chat/completions", json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line:
                assert line.startswith("data: ")
                events.append((time.perf_counter() - start, line[len("data: "):]))
    return events


def content_of(events):
    chunks = [json.loads(data) for _, data in events if data != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


def content_arrivals(events):
    """(arrival time, text) of each chunk that carries content."""
    chunks = [(t, json.loads(data)) for t, data in events if data != "[DONE]"]
    pairs = [(t, c["choices"][0]["delta"].get("content")) for t, c in chunks if c["choices"]]
    return [(t, text) for t, text in pairs if text]


def wait_for_stats(sim, model, **expected):
    deadline = time.monotonic() + LATE_S
    while True:
        stats = sim.stats(model)
        if all(stats[k] == v for k, v in expected.items()) or time.monotonic() > deadline:
            return stats
        time.sleep(0.01)


# Wire format


@pytest.mark.integration
def test_non_stream_body_is_openai_format(client):
    response = chat(client, max_tokens=12)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == "test-model"
    assert body["system_fingerprint"] == "simulated"
    (choice,) = body["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"].startswith("[simulated test-model] Re: Explain block")
    assert choice["finish_reason"] == "length"


@pytest.mark.integration
def test_non_stream_usage_counts_words(client):
    body = chat(client, max_tokens=12).json()
    assert body["usage"] == {"prompt_tokens": 8, "completion_tokens": 12, "total_tokens": 20}
    assert len(body["choices"][0]["message"]["content"].split()) == 12


@pytest.mark.integration
def test_stream_chunks_and_done(client):
    events = stream_events(client, max_tokens=10)
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in c for c in chunks)
    assert content_of(events) == chat(client, max_tokens=10).json()["choices"][0]["message"][
        "content"
    ]


@pytest.mark.integration
def test_stream_usage_chunk_when_asked(client):
    events = stream_events(client, max_tokens=7, stream_options={"include_usage": True})
    chunks = [json.loads(data) for _, data in events[:-1]]
    *body, last = chunks
    assert last["choices"] == []
    assert last["usage"] == {"prompt_tokens": 8, "completion_tokens": 7, "total_tokens": 15}
    assert all(c["usage"] is None for c in body)


@pytest.mark.integration
def test_max_completion_tokens_and_short_answers(client, sim):
    assert chat(client, max_completion_tokens=5).json()["usage"]["completion_tokens"] == 5
    sim.update_profile("test-model", answer_tokens=9)
    body = chat(client, max_tokens=100).json()
    assert body["usage"]["completion_tokens"] == 9
    assert body["choices"][0]["finish_reason"] == "stop"


@pytest.mark.integration
def test_stop_sequence_cuts_the_answer(client, sim):
    sim.script("test-model", ["alpha beta STOP gamma"])
    body = chat(client, stop=["STOP", "zzz"]).json()
    assert body["choices"][0]["message"]["content"] == "alpha beta "
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 2


@pytest.mark.integration
def test_unknown_fields_are_ignored(client):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    response = chat(client, tools=tools, n=1, user="u", logit_bias={}, max_tokens=3)
    assert response.status_code == 200
    assert response.json()["usage"]["completion_tokens"] == 3


@pytest.mark.integration
def test_bad_requests_get_400(client):
    assert client.post("/chat/completions", json={"model": "m"}).status_code == 400
    assert client.post("/chat/completions", content=b"{not json").status_code == 400
    assert chat(client, headers={"x-sim-fault": "explode"}).status_code == 400
    assert chat(client, max_tokens=0).status_code == 400


# Answers


@pytest.mark.integration
def test_answers_are_deterministic_and_seeded(client):
    def text(**fields):
        return chat(client, max_tokens=30, **fields).json()["choices"][0]["message"]["content"]

    assert text(seed=1) == text(seed=1)
    assert text(seed=1) != text(seed=2)
    assert text(seed=1, temperature=0.2) != text(seed=1, temperature=0.9)
    assert text(seed=1, temperature=1) == text(seed=1, temperature=1.0)
    other = [{"role": "user", "content": "Something else entirely"}]
    assert text(seed=1) != chat(client, messages=other, seed=1).json()["choices"][0]["message"][
        "content"
    ]


@pytest.mark.integration
def test_prompt_tokens_count_every_message(client):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "one two three"}]},
        {"role": "assistant", "content": "four"},
        {"role": "user", "content": "five six"},
    ]
    assert chat(client, messages=messages).json()["usage"]["prompt_tokens"] == 8


@pytest.mark.integration
def test_script_endpoint_cycles_replies(client, sim):
    sim.script("arbiter", ["1", "2"])
    got = [chat(client, "arbiter").json()["choices"][0]["message"]["content"] for _ in range(3)]
    assert got == ["1", "2", "1"]
    events = stream_events(client, "arbiter")
    assert content_of(events) == "2"


@pytest.mark.integration
def test_profile_replies_and_in_process_responder():
    profiles = {
        "canned": {"replies": ["first answer", "second answer"]},
        "echo": SimProfile(responder=lambda messages: f"saw {len(messages)} messages"),
    }
    with SimServer(profiles) as server, httpx.Client(base_url=server.base_url,
                                                     trust_env=False) as c:
        texts = [chat(c, "canned").json()["choices"][0]["message"]["content"] for _ in range(3)]
        assert texts == ["first answer", "second answer", "first answer"]
        assert chat(c, "echo").json()["choices"][0]["message"]["content"] == "saw 1 messages"


def test_split_tokens_round_trips():
    for text in ["a b  c", "  lead and trail  ", "one", "x\ny\tz"]:
        assert "".join(split_tokens(text)) == text
    assert split_tokens("a b c") == ["a", " b", " c"]


# Timing


@pytest.mark.integration
def test_autoregressive_timing(client, sim):
    sim.update_profile("ar", ttft_s=0.15, tokens_per_s=50.0)
    events = stream_events(client, "ar", max_tokens=11)
    content_times = [t for t, _ in content_arrivals(events)]
    # Token k is due 0.15 s + k / 50 after the server got the request: never sooner, however
    # busy the machine (only lower bounds hold under load; the schedule itself is
    # SimProfile.arrival_s, checked exactly in test_profile_schedule_is_exact).
    assert content_times[0] >= 0.15 - _TIMER_SLACK_S
    assert content_times[-1] >= 0.15 + 10 / 50 - _TIMER_SLACK_S


@pytest.mark.integration
def test_diffusion_short_answer_costs_one_canvas(client, sim):
    sim.update_profile("diff", decoding="diffusion", canvas_s=0.2, ttft_s=0.0, answer_tokens=600)
    start = time.perf_counter()
    assert chat(client, "diff", max_tokens=20).json()["usage"]["completion_tokens"] == 20
    one = time.perf_counter() - start
    start = time.perf_counter()
    assert chat(client, "diff", max_tokens=300).json()["usage"]["completion_tokens"] == 300
    two = time.perf_counter() - start
    # Each answer waits out its whole canvases (lower bounds: a busy machine only adds time); that
    # 20 tokens cost one canvas and 300 two is the profile's arithmetic, checked exactly below.
    assert one >= 0.2 - _TIMER_SLACK_S and two >= 0.4 - _TIMER_SLACK_S
    profile = sim.app.state.sim.profile("diff")
    assert profile.total_s(20) == profile.total_s(256) == 0.2 and profile.total_s(300) == 0.4


def test_profile_schedule_is_exact():
    autoregressive = SimProfile(ttft_s=0.15, tokens_per_s=50.0)
    assert [autoregressive.arrival_s(k) for k in (0, 1, 10)] == [0.15, 0.15 + 1 / 50, 0.15 + 10 / 50]
    diffusion = SimProfile(decoding="diffusion", canvas_s=0.2, canvas_length=256)
    assert [diffusion.arrival_s(k) for k in (0, 255, 256)] == [0.2, 0.2, 0.4]
    assert diffusion.first_token_s() == 0.2


@pytest.mark.integration
def test_diffusion_stream_sends_whole_canvases(client, sim):
    sim.update_profile("diff", decoding="diffusion", canvas_s=0.05, canvas_length=8)
    events = stream_events(client, "diff", max_tokens=20)
    arrivals = content_arrivals(events)
    assert [len(text.split()) for _, text in arrivals] == [8, 8, 4]
    # Canvas k is due k * canvas_s after the server got the request: never sooner, however busy
    # the machine (a gap between two arrivals shrinks when the first one is late, so a lower
    # bound on gaps failed under load; one on arrival times cannot).
    assert all(t >= (k + 1) * 0.05 for k, (t, _) in enumerate(arrivals)), arrivals


def test_default_profiles_are_realistic():
    gemma = DEFAULT_PROFILES["google/diffusiongemma-26B-A4B-it"]
    assert gemma.decoding == "diffusion" and 0.15 <= gemma.canvas_s <= 0.35
    assert DEFAULT_PROFILES["mercury-2"].decoding == "diffusion"
    claude = DEFAULT_PROFILES["claude-sonnet-4-5"]
    assert claude.decoding == "autoregressive" and claude.ttft_s >= 0.5
    assert 40 <= claude.tokens_per_s <= 100
    # A 20-token answer from the diffusion model still pays a full canvas.
    assert gemma.total_s(20) == gemma.total_s(256) < gemma.total_s(257)


# Faults


@pytest.mark.integration
def test_fault_500(client):
    response = chat(client, headers={"x-sim-fault": "500"})
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "server_error"


@pytest.mark.integration
def test_fault_429_has_retry_after(client, sim):
    response = chat(client, headers={"x-sim-fault": "429"})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    sim.update_profile("test-model", retry_after_s=2.5)
    response = chat(client, headers={"x-sim-fault": "429"})
    assert response.headers["retry-after"] == "2.5"
    assert response.headers["retry-after-ms"] == "2500"


@pytest.mark.integration
async def test_fault_hang_times_out_and_counts_cancelled(sim):
    async with httpx.AsyncClient(base_url=sim.base_url, trust_env=False) as c:
        hung = asyncio.create_task(c.post(
            "/chat/completions", json={"model": "test-model", "messages": USER},
            headers={"x-sim-fault": "hang"}, timeout=3.0,
        ))
        assert await asyncio.to_thread(eventually, lambda: sim.stats("test-model")["in_flight"] == 1)
        with pytest.raises(httpx.ReadTimeout):
            await hung  # still hanging, not answered
        # The server noticed the client leaving and freed the request (a hang never ends by itself).
        stats = await asyncio.to_thread(wait_for_stats, sim, "test-model", cancelled=1)
        assert stats == {"requests": 1, "completed": 0, "in_flight": 0, "peak_in_flight": 1, "cancelled": 1,
                         "faults": 1}
        # And it keeps serving.
        assert (await c.post("/chat/completions",
                             json={"model": "test-model", "messages": USER})).status_code == 200


@pytest.mark.integration
def test_fault_drop_mid_stream(client):
    received = []
    body = {"model": "test-model", "messages": USER, "stream": True, "max_tokens": 20}
    with pytest.raises(httpx.RemoteProtocolError):
        with client.stream("POST", "/chat/completions", json=body,
                           headers={"x-sim-fault": "drop"}) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                received.append(line)
    assert any('"content":"[simulated' in line for line in received)
    assert "data: [DONE]" not in received


@pytest.mark.integration
def test_fault_drop_without_stream(client):
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, headers={"x-sim-fault": "drop"})


@pytest.mark.integration
def test_fault_malformed(client):
    response = chat(client, headers={"x-sim-fault": "malformed"})
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()
    events = stream_events(client, headers={"x-sim-fault": "malformed"})
    payloads = [data for _, data in events if data != "[DONE]"]
    json.loads(payloads[0])  # good chunks first
    with pytest.raises(json.JSONDecodeError):
        for data in payloads:
            json.loads(data)


@pytest.mark.integration
def test_fault_drip_is_slow(client, sim):
    sim.update_profile("test-model", drip_interval_s=0.05)
    events = stream_events(client, headers={"x-sim-fault": "drip"}, max_tokens=6)
    assert len(content_of(events).split()) == 6
    times = [t for t, _ in content_arrivals(events)]  # seconds after sending
    # Token i leaves the server no earlier than i drip intervals after the request came in, so it
    # arrives no earlier than that after sending: a bound, not a margin (arrival gaps between two
    # tokens can shrink when the client reads late, so they are not compared).
    assert len(times) == 6 and all(t >= i * 0.05 for i, t in enumerate(times))
    start = time.perf_counter()
    chat(client, headers={"x-sim-fault": "drip"}, max_tokens=6)
    assert time.perf_counter() - start >= 0.22


@pytest.mark.integration
def test_fault_sequence_is_consumed_in_order(client, sim):
    sim.set_faults("test-model", ["500", None, "429"])
    assert [chat(client).status_code for _ in range(4)] == [500, 200, 429, 200]
    assert sim.stats("test-model")["faults"] == 2


@pytest.mark.integration
def test_profile_fault_rate_is_deterministic(client, sim):
    sim.update_profile("flaky", fault="500", fault_rate=0.5)
    assert [chat(client, "flaky").status_code for _ in range(4)] == [200, 500, 200, 500]


@pytest.mark.integration
def test_reset_clears_faults_scripts_and_profiles(client, sim):
    sim.set_faults("test-model", ["500"])
    sim.script("test-model", ["scripted"])
    sim.update_profile("test-model", answer_tokens=3)
    sim.reset()
    body = chat(client).json()
    assert body["choices"][0]["message"]["content"].startswith("[simulated test-model]")
    assert body["usage"]["completion_tokens"] == 40
    assert sim.stats() == {"test-model": {"requests": 1, "completed": 1, "in_flight": 0,
                                          "peak_in_flight": 1, "cancelled": 0, "faults": 0}}


@pytest.mark.integration
def test_bad_control_requests_raise(sim):
    with pytest.raises(ValueError, match="unknown profile fields"):
        sim.update_profile("m", tokens_per_second=5)
    with pytest.raises(ValueError):
        sim.set_faults("m", ["boom"])


# Stats and cancellation


@pytest.mark.integration
async def test_client_disconnect_counts_cancelled(sim):
    sim.update_profile("slow", tokens_per_s=20.0, answer_tokens=100)
    body = {"model": "slow", "messages": USER, "stream": True}
    async with httpx.AsyncClient(base_url=sim.base_url, trust_env=False) as c:
        async with c.stream("POST", "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if '"content":"[simulated' in line:
                    break
            assert sim.stats("slow")["in_flight"] == 1
    stats = await asyncio.to_thread(wait_for_stats, sim, "slow", in_flight=0, cancelled=1)
    assert stats == {"requests": 1, "completed": 0, "in_flight": 0, "peak_in_flight": 1, "cancelled": 1, "faults": 0}


@pytest.mark.integration
async def test_64_concurrent_streams(sim):
    body = {"model": "fast", "messages": USER, "stream": True, "max_tokens": 30}
    limits = httpx.Limits(max_connections=64)
    async with httpx.AsyncClient(base_url=sim.base_url, trust_env=False, limits=limits) as c:

        async def one() -> str:
            async with c.stream("POST", "/chat/completions", json=body) as response:
                return (await response.aread()).decode()

        bodies = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(64))), 10)
    assert all(b.endswith("data: [DONE]\n\n") for b in bodies)
    texts = {content_of([(0, line[6:]) for line in b.splitlines() if line]) for b in bodies}
    assert len(texts) == 1 and len(texts.pop().split()) == 30
    assert sim.stats("fast")["completed"] == 64


# The simulator's own cost per request is a benchmark's claim: benchmarks/simulator_overhead.py.


# Labelling and discovery


@pytest.mark.integration
def test_labelling(client, sim):
    response = chat(client)
    assert response.headers["x-simulated"] == "true"
    assert client.get("/nope").headers["x-simulated"] == "true"
    models = client.get("/models").json()
    assert models["object"] == "list"
    assert {m["owned_by"] for m in models["data"]} == {"simulated"}
    assert set(DEFAULT_PROFILES) <= {m["id"] for m in models["data"]}
    health = httpx.get(f"{sim.url}/healthz", trust_env=False)
    assert health.json() == {"status": "ok", "simulated": True}


@pytest.mark.integration
def test_any_model_name_gets_a_fast_answer(client):
    body = chat(client, "some/unknown-model").json()
    # The fallback profile answered: 40 tokens, with no simulated delay before or between them.
    assert body["usage"]["completion_tokens"] == FALLBACK_PROFILE.answer_tokens
    assert FALLBACK_PROFILE.first_token_s() == 0 and FALLBACK_PROFILE.tokens_per_s is None
    assert body["choices"][0]["message"]["content"].startswith("[simulated some/unknown-model]")


# Profiles from config


def test_load_profiles_from_yaml_and_dict(tmp_path):
    path = tmp_path / "profiles.yaml"
    path.write_text("profiles:\n  fast-diff:\n    decoding: diffusion\n    canvas_s: 0.1\n"
                    "  flaky:\n    fault: 500\n    fault_rate: 0.25\n")
    profiles = load_profiles(path)
    assert profiles["fast-diff"].decoding == "diffusion" and profiles["fast-diff"].canvas_s == 0.1
    assert profiles["flaky"].fault == "500"
    assert [profiles["flaky"].faults_request(i) for i in range(1, 5)] == [None, None, None, "500"]
    assert load_profiles({"x": {"ttft_s": 0.5}})["x"].ttft_s == 0.5
    with pytest.raises(ConfigError):
        load_profiles({"x": {"fault": "explode"}})
    with pytest.raises(ConfigError):
        load_profiles({"x": {"ttft": 1}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        load_profiles(bad)
    assert info.value.path == str(bad)


# Runner


@pytest.mark.integration
async def test_async_context_manager_and_own_profiles():
    async with SimServer({"only": {"answer_tokens": 4}}) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        async with httpx.AsyncClient(base_url=server.base_url, trust_env=False) as c:
            response = await c.post("/chat/completions",
                                    json={"model": "only", "messages": USER})
            models = (await c.get("/models")).json()["data"]
    assert response.json()["usage"]["completion_tokens"] == 4
    assert [m["id"] for m in models] == ["only"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/healthz", trust_env=False)


# Real clients


@pytest.mark.integration
async def test_openai_sdk_reads_stream_and_usage(sim):
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="sim", max_retries=0)
    completion = await client.chat.completions.create(model="m", messages=USER, max_tokens=6)
    assert completion.usage.completion_tokens == 6
    assert completion.system_fingerprint == "simulated"
    stream = await client.chat.completions.create(
        model="m", messages=USER, max_tokens=6, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == completion.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 6
    await client.close()


@pytest.mark.integration
async def test_litellm_openai_route(sim):
    litellm = pytest.importorskip("litellm")
    response = await litellm.acompletion(
        model="openai/claude-like", api_base=sim.base_url, api_key="sim", messages=USER,
        max_tokens=5, seed=3,
    )
    assert response.choices[0].message.content.startswith("[simulated claude-like]")
    assert response.usage.completion_tokens == 5
    stream = await litellm.acompletion(
        model="openai/claude-like", api_base=sim.base_url, api_key="sim", messages=USER,
        max_tokens=5, seed=3, stream=True,
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
    assert text == response.choices[0].message.content


@pytest.mark.integration
def test_network_guard_blocks_non_loopback(network_guard):
    with socket.socket() as sock, pytest.raises(OSError, match="beyond loopback"):
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: never routable
    assert network_guard == [("192.0.2.1", 443)]
    network_guard.clear()  # the guard would otherwise fail this test at teardown
    with socket.socket() as closed_port, socket.socket() as sock:
        closed_port.bind(("127.0.0.1", 0))  # bound, not listening: connecting is refused
        with pytest.raises(ConnectionRefusedError):  # the OS refused it, not the guard
            sock.connect(closed_port.getsockname())
    assert network_guard == []


@pytest.mark.integration
def test_stream_interval_batches_tokens_into_fewer_events(sim):
    import httpx

    sim.update_profile("batched", ttft_s=0.0, tokens_per_s=2000.0, answer_tokens=40, stream_interval_s=0.005)
    sim.update_profile("per-token", ttft_s=0.0, tokens_per_s=2000.0, answer_tokens=40)
    events = {}
    for model in ("batched", "per-token"):
        body = httpx.post(f"{sim.base_url}/chat/completions", timeout=10,
                          json={"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}]}).text
        chunks = [line for line in body.splitlines() if line.startswith("data: {")]
        events[model] = len(chunks)
        text = "".join(json.loads(c[6:])["choices"][0]["delta"].get("content") or ""
                       for c in chunks if json.loads(c[6:])["choices"])
        assert text.startswith("[simulated")
    assert events["batched"] < events["per-token"] / 3  # 40 tokens over 20 ms, 5 ms per event
