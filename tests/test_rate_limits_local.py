"""Rate limits kept in this process (`state: backend: local`), through the Router, the server and
the simulated model server on loopback. Every limiter's clock is frozen, so no bucket refills
while a test runs: the counts below are exact, not margins."""

from __future__ import annotations

import httpx
import pytest

from backends.errors import ConfigError, RateLimitExceeded
from router.config_loader import load_config, parse_config
from router.core import Router
from router.server import RouteServer
from router.server.keys import server_keys

pytestmark = pytest.mark.integration

NOW = 1_000.0
ALICE, BOB = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"


def config(sim, *, a: dict | None = None, **top) -> dict:
    """`a` (cheap, limited as asked) and `b` (ten times the price, unlimited) in one tier."""
    def backend(model: str, **extra) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, **extra}

    return {"backends": {"a": backend("m-a", **(a or {})), "b": backend("m-b", price={"input": 10, "output": 10})},
            "routing": {"scorer": {"kind": "length"}, "tiers": [{"name": "all", "backends": ["a", "b"]}]},
            "log": {"enabled": False}, **top}


def router_for(cfg: dict) -> Router:
    router = Router(load_config(cfg), log=False)
    router.rate_limits.clock = lambda: NOW
    return router


def test_exactly_rpm_requests_reach_a_limited_backend_and_the_rest_go_to_the_next(sim):
    with router_for(config(sim, a={"rpm": 3})) as router:
        answered = [router.complete("hi").backend for _ in range(7)]
        decision = router.decide([{"role": "user", "content": "hi"}])
    assert sim.stats("m-a")["requests"] == 3 and sim.stats("m-b")["requests"] == 4
    assert answered.count("a") == 3
    assert decision.chosen == "b"
    assert "a is at its rate limit (rpm 3), free in 20.0 s" in decision.reason
    assert decision.plan.candidate("a").rate_limit == "at its rate limit (rpm 3), free in 20.0 s"
    assert router.breakers["a"].state == "closed"


def test_with_every_candidate_at_its_limit_the_api_raises_with_retry_after_and_the_breaker_hears_nothing(sim):
    with router_for(config(sim, a={"rpm": 2})) as router:
        for _ in range(2):
            assert router.complete("hi", model="a").backend == "a"
        for _ in range(4):  # more than the breaker's 3 failures: refusals are no failures
            with pytest.raises(RateLimitExceeded) as caught:
                router.complete("hi", model="a")
        streamed = router.stream("hi", model="a")
        with pytest.raises(RateLimitExceeded):
            list(streamed)
    assert caught.value.retry_after_s == pytest.approx(30.0)
    assert "a: at its rate limit (rpm 2), free in 30.0 s" in str(caught.value)
    assert "try again in 30 s" in str(caught.value) and "\n" not in str(caught.value)
    assert sim.stats("m-a")["requests"] == 2
    assert router.breakers["a"].state == "closed"


def test_tpm_charges_the_estimate_at_admission_and_the_real_usage_after(sim):
    with router_for(config(sim, a={"tpm": 1000})) as router:
        result = router.complete("x" * 400, model="a", max_tokens=500)  # charged 100 + 500
        used = result.completion.usage.input_tokens + result.completion.usage.output_tokens
        assert 0 < used < 600
        left = 1000 - used  # the estimate of 600 was charged, then corrected to what was used
        assert router.rate_limits.peek("a", left) is None and router.rate_limits.peek("a", left + 1) is not None
        streamed = list(router.stream("x" * 400, model="a", max_tokens=500))
        assert streamed and router.rate_limits.peek("a", left) is not None  # a stream's usage is charged too
        assert router.decide([{"role": "user", "content": "hi"}], max_tokens=5000).chosen == "b"  # 5000 cannot fit


def test_rpm_and_tpm_must_be_positive_whole_numbers_named_with_file_and_line(sim):
    text = f"""\
backends:
  a: {{kind: openai, model: m-a, base_url: "{sim.base_url}", rpm: 0}}
routing:
  tiers: [{{name: all, backends: [a]}}]
"""
    with pytest.raises(ConfigError, match=r"limits.yaml:2.*rpm") as caught:
        parse_config(text, "limits.yaml")
    assert "\n" not in str(caught.value).strip()
    with pytest.raises(ConfigError, match="environment variable"):
        parse_config(text.replace("rpm: 0", "rpm: 5") + "server:\n  keys:\n    alice: {key: sk-literal-key-123456}\n",
                     "limits.yaml")


def test_server_keys_come_from_the_environment_and_a_missing_one_names_its_variable(sim, monkeypatch, tmp_path):
    cfg = config(sim, server={"keys": {"alice": {"key": "${ALICE_KEY}", "rpm": 2}}})
    loaded = load_config(cfg)
    monkeypatch.delenv("ALICE_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"server.keys.alice reads its key from \$\{ALICE_KEY\}"):
        server_keys(loaded, "0.0.0.0", None)
    monkeypatch.setenv("ALICE_KEY", ALICE)
    monkeypatch.setenv("ROUTE_API_KEY", BOB)
    assert server_keys(loaded, "0.0.0.0", "ROUTE_API_KEY") == {"ROUTE_API_KEY": BOB, "alice": ALICE}
    monkeypatch.setenv("ALICE_KEY", BOB)
    with pytest.raises(ConfigError, match="same key"):
        server_keys(loaded, "0.0.0.0", "ROUTE_API_KEY")


GEMINI = "/v1beta/models/{model}:generateContent"  # its clients send the key as x-goog-api-key


def _ask(client: httpx.Client, path: str, key: str, *, model: str = "a", stream: bool = False) -> httpx.Response:
    if path == GEMINI:
        return client.post(path.format(model=model), json={"contents": [{"parts": [{"text": "hi"}]}]},
                           headers={"x-goog-api-key": key})
    body: dict = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    if path == "/v1/messages":
        body["max_tokens"] = 64
    if path == "/v1/responses":
        body = {"model": model, "input": "hi", "stream": stream}
    return client.post(path, json=body, headers={"authorization": f"Bearer {key}"})


def test_the_server_answers_429_with_retry_after_in_each_apis_shape(sim):
    router = router_for(config(sim, a={"rpm": 1}))
    with RouteServer(router, api_keys={"bob": BOB}) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert _ask(client, "/v1/chat/completions", BOB).status_code == 200
        refused = {path: _ask(client, path, BOB) for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses",
                                                              GEMINI)}
        streamed = _ask(client, "/v1/chat/completions", BOB, stream=True)
        routed = _ask(client, "/v1/chat/completions", BOB, model="auto")
    for response in (*refused.values(), streamed):
        assert response.status_code == 429 and response.headers["retry-after"] == "60"
    chat = refused["/v1/chat/completions"].json()["error"]
    assert chat["type"] == "rate_limit_error" and chat["code"] == "rate_limit_exceeded"
    assert "at its rate limit (rpm 1), free in 60.0 s" in chat["message"]
    assert refused["/v1/messages"].json()["error"]["type"] == "rate_limit_error"
    assert refused["/v1/messages"].json()["type"] == "error"
    assert refused["/v1/responses"].json()["error"]["code"] == "rate_limit_exceeded"
    assert refused[GEMINI].json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert routed.status_code == 200 and routed.headers["x-route-answered-by"] == "b"
    assert sim.stats("m-a")["requests"] == 1


def test_a_key_at_its_limit_gets_429_before_any_routing_and_other_keys_are_unaffected(sim):
    cfg = config(sim, server={"keys": {"alice": {"key": "${ALICE_KEY}", "rpm": 2}, "carol": {"key": "${CAROL_KEY}",
                                                                                              "tpm": 10}}})
    router = router_for(cfg)
    carol = "carol-key-0123456789abcdef"
    keys = {"alice": ALICE, "carol": carol, "ROUTE_API_KEY": BOB}
    with RouteServer(router, api_keys=keys) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        alice = [_ask(client, path, ALICE, model="b").status_code for path in ("/v1/chat/completions", "/v1/messages")]
        refused = [_ask(client, path, ALICE, model="b") for path in ("/v1/chat/completions", "/v1/messages",
                                                                      "/v1/responses", GEMINI)]
        before = sim.stats("m-b")["requests"]
        bob = _ask(client, "/v1/chat/completions", BOB, model="b")
        # tpm is paid after the answer: carol's first request puts her in debt, the second waits
        carol_first = _ask(client, "/v1/chat/completions", carol, model="b")
        carol_second = _ask(client, "/v1/chat/completions", carol, model="b")
        wrong = _ask(client, "/v1/chat/completions", "not-a-key-0123456789", model="b")
        models = client.get("/v1/models", headers={"authorization": f"Bearer {ALICE}"})
    assert alice == [200, 200]
    assert [r.status_code for r in refused] == [429, 429, 429, 429]
    assert all(r.headers["retry-after"] == "30" for r in refused)
    assert "API key 'alice' is at its rate limit (rpm 2), free in 30.0 s" in refused[0].json()["error"]["message"]
    assert refused[1].json()["type"] == "error" and refused[1].json()["error"]["type"] == "rate_limit_error"
    assert refused[3].json()["error"]["status"] == "RESOURCE_EXHAUSTED" and "(rpm 2)" in refused[3].json()["error"]["message"]
    assert ALICE not in refused[0].text
    assert before == 2 and bob.status_code == 200 and sim.stats("m-b")["requests"] == 4
    assert carol_first.status_code == 200
    assert carol_second.status_code == 429 and "(tpm 10)" in carol_second.json()["error"]["message"]
    assert wrong.status_code == 401 and models.status_code == 200  # listing models costs no request
