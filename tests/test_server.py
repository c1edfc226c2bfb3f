"""`route serve` through the real `openai` SDK, served by uvicorn on loopback, routing to the
simulated model server: plain and streamed answers, decision headers, models, OpenAI-shaped
errors, tools, a consortium as the model, disconnects cancelling the upstream, and draining."""

from __future__ import annotations

import dataclasses
import threading

import httpx
import openai
import pytest

from router.consortium.simulated import arbiter_responder
from router.server import RouteServer
from router.store import Store
from tests.helpers import make_router
from tests.waiting import eventually

pytestmark = pytest.mark.integration

FAST = {"ttft_s": 0.0, "tokens_per_s": None}


@pytest.fixture
def server(sim):
    router = make_router(sim)
    with RouteServer(router) as srv:
        yield srv
    router.request_log.flush()


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=20)


def test_plain_answer_with_the_decision_in_headers(client, sim):
    sim.script("m-small", ["four"])
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "2+2?"}])
    answer = raw.parse()
    assert answer.choices[0].message.content == "four"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage.completion_tokens >= 1 and answer.model == "auto"
    assert raw.headers["x-route-backend"] == "small" and raw.headers["x-route-tier"] == "low"
    assert raw.headers["x-route-answered-by"] == "small"
    assert 0.0 <= float(raw.headers["x-route-score"]) < 0.5


def test_long_prompt_routes_up_a_tier(client, sim):
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "explain " * 200}])
    assert raw.headers["x-route-backend"] == "big" and raw.headers["x-route-tier"] == "high"
    assert raw.parse().choices[0].message.content.startswith("[simulated m-big]")


def test_streamed_answer_in_openai_chunks_with_usage(client, sim):
    sim.script("m-big", ["alpha beta gamma delta"])
    stream = client.chat.completions.create(model="big", messages=[{"role": "user", "content": "go"}], stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "alpha beta gamma delta"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens >= 4
    assert {c.id for c in chunks} == {chunks[0].id}


def test_max_tokens_and_stop_reach_the_backend(client, sim):
    sim.script("m-small", ["one two three STOP four five"])
    stopped = client.chat.completions.create(model="small", messages=[{"role": "user", "content": "count"}],
                                             stop=["STOP"], temperature=0.2)
    assert stopped.choices[0].message.content.strip() == "one two three"
    sim.script("m-small", ["one two three four five six seven eight"])
    capped = client.chat.completions.create(model="small", messages=[{"role": "user", "content": "count"}],
                                            max_tokens=2)
    assert capped.usage.completion_tokens == 2 and capped.choices[0].finish_reason == "length"


def test_models_lists_auto_backends_and_consortia(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["auto", "small", "big", "slow", "glm", "arbiter", "offline", "pair"]


def test_unknown_model_is_a_404_in_openai_shape(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-nope", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "model_not_found" and "gpt-nope" in caught.value.body["message"]


def test_bad_requests_are_400s_in_openai_shape(client, server):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="auto", messages=[])
    assert caught.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "x"}], temperature=5)
    assert caught.value.body["param"] == "temperature"
    raw = httpx.post(f"{server.base_url}/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert raw.status_code == 400 and raw.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{server.base_url}/chat/completions").json()["error"]["code"] == "invalid_request"  # 405
    missing = httpx.get(f"{server.base_url}/embeddings")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_backend_failures_map_to_503_504_and_stream_errors(client, sim, server):
    sim.set_faults("m-small", ["500"])
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 503 and caught.value.body["code"] == "upstream_unavailable"
    sim.set_faults("m-small", ["500"])
    with pytest.raises(openai.InternalServerError) as caught:  # before the first chunk: a real HTTP status
        client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert caught.value.status_code == 503
    sim.set_faults("m-small", ["drop"])  # text, then the connection drops: an error event in the stream
    stream = client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}], stream=True)
    with pytest.raises(openai.APIError, match="small"):
        list(stream)


def test_deadline_is_a_504(sim):
    router = make_router(sim, timeout_s=0.3)
    sim.set_faults("m-small", ["hang"])
    with RouteServer(router) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=10)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 504 and caught.value.body["code"] == "upstream_timeout"


TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]


def test_tools_to_a_backend_that_cannot_take_them_is_a_clear_400(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="offline", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    body = caught.value.body
    assert body["code"] == "tools_not_supported" and "offline" in body["message"] and "small" in body["message"]


def test_a_ranked_consortium_takes_tools(client):
    """Issue 31: a consortium judging by rank answers in agent loops (its winner's tool call is
    returned as is: tests/test_consortium_tools.py); one judging by synthesis is refused there."""
    answer = client.chat.completions.create(model="pair", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    assert answer.choices[0].message.content


def test_tools_pass_through_to_a_backend_that_takes_them(client, sim):
    answer = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "time?"}],
                                            tools=TOOLS, tool_choice="auto")
    assert answer.choices[0].message.content.startswith("[simulated m-small]")


def use_fast_consortium(sim) -> None:
    sim.update_profile("glm-5.2", **FAST)
    sim.update_profile("mercury-2", ttft_s=0.0, canvas_s=0.0)
    state = sim.app.state.sim
    state.profiles["mercury-2"] = dataclasses.replace(state.profile("mercury-2"), responder=arbiter_responder())


def test_a_consortium_as_the_model_plain_and_streamed(client, sim, server):
    use_fast_consortium(sim)
    raw = client.chat.completions.with_raw_response.create(model="pair", messages=[{"role": "user", "content": "hi"}])
    answer = raw.parse()
    assert raw.headers["x-route-backend"] == "pair" and raw.headers["x-route-answered-by"] == "pair"
    assert answer.choices[0].message.content.startswith("[simulated glm-5.2]")
    assert sim.stats("glm-5.2")["completed"] == 2 and sim.stats("mercury-2")["completed"] == 1
    stream = client.chat.completions.create(model="pair", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).startswith("[simulated glm-5.2]")
    server.app.state.router.request_log.flush()
    assert [r["requested"] for r in Store().recent(5)] == ["pair", "pair"]


def test_metrics_count_requests_tokens_decisions_and_breakers(client, server, sim):
    client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
    sim.set_faults("m-big", ["500"])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="big", messages=[{"role": "user", "content": "hi"}])
    text = httpx.get(f"{server.url}/metrics").text
    assert 'route_requests_total{backend="small",model="auto",status="ok"} 1.0' in text
    assert 'route_requests_total{backend="big",model="big",status="error"} 1.0' in text
    assert 'route_routing_decisions_total{backend="small",tier="low"} 1.0' in text
    assert 'route_tokens_total{backend="small",direction="output"}' in text
    assert 'route_request_duration_seconds_count{backend="small"} 1.0' in text
    assert 'route_breaker_state{backend="big",state="closed"} 1.0' in text
    # Every upstream attempt, by outcome, and what the latency model learned.
    assert 'route_upstream_attempts_total{backend="small",outcome="ok"} 1.0' in text
    assert 'route_upstream_attempts_total{backend="big",outcome="BackendUnavailable"} 1.0' in text
    assert 'route_learned_latency_samples{backend="small"} 1.0' in text
    assert httpx.get(f"{server.url}/healthz").json()["status"] == "ok"


def test_client_disconnect_mid_stream_cancels_the_upstream(client, sim, server):
    sim.update_profile("m-slow", ttft_s=0.0, tokens_per_s=20.0, answer_tokens=200)  # ~10 s if left running
    stream = client.chat.completions.create(model="slow", messages=[{"role": "user", "content": "hi"}], stream=True)
    received = [next(stream), next(stream)]
    assert received[1].choices[0].delta.content
    stream.close()
    assert eventually(lambda: sim.stats("m-slow")["cancelled"] == 1), sim.stats("m-slow")
    assert sim.stats("m-slow")["in_flight"] == 0 and sim.stats("m-slow")["completed"] == 0
    router = server.app.state.router
    assert eventually(lambda: router.request_log.flush() and Store().recent(1)[0]["status"] == "cancelled")


def test_client_timeout_on_a_plain_request_cancels_the_upstream(server, sim):
    sim.update_profile("m-slow", ttft_s=0.0, tokens_per_s=20.0, answer_tokens=200)
    impatient = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=0.4)
    with pytest.raises(openai.APITimeoutError):
        impatient.chat.completions.create(model="slow", messages=[{"role": "user", "content": "hi"}])
    assert eventually(lambda: sim.stats("m-slow")["cancelled"] == 1), sim.stats("m-slow")
    router = server.app.state.router  # the router itself logs a caller that gave up
    assert eventually(lambda: router.request_log.flush() and Store().recent(1)[0]["status"] == "cancelled")


def _refuses(url: str) -> bool:
    """No new request is answered: the connection is refused, or -- accepted by the kernel from
    the listening socket's backlog in the moment before the server closed it -- reset unanswered."""
    try:
        httpx.get(f"{url}/healthz", timeout=5)
    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
        return True
    return False


def test_shutdown_drains_in_flight_streams(sim):
    sim.update_profile("m-slow", ttft_s=0.0, tokens_per_s=25.0, answer_tokens=20)  # ~0.8 s
    sim.script("m-slow", [" ".join(f"w{i}" for i in range(20))])
    srv = RouteServer(make_router(sim), drain_timeout_s=10).start()
    client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=20)
    stream = client.chat.completions.create(model="slow", messages=[{"role": "user", "content": "hi"}], stream=True)
    parts = [next(stream).choices[0].delta.content or ""]
    stopper = threading.Thread(target=srv.stop)
    stopper.start()  # what SIGTERM does: stop accepting, let this stream finish
    assert eventually(lambda: _refuses(srv.url))  # no new connections while draining
    parts += [c.choices[0].delta.content or "" for c in stream if c.choices]
    stopper.join(timeout=10)
    assert "".join(parts) == " ".join(f"w{i}" for i in range(20))
    assert sim.stats("m-slow")["completed"] == 1 and sim.stats("m-slow")["cancelled"] == 0
