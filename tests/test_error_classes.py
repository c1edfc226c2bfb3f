"""A client's mistake stays the client's (issue 38): a request the upstream refuses for its shape
is the request's fault, on every protocol and every backend kind. It goes back as a 400 in the
client's protocol naming the field, is sent upstream at most once (no retry), and never counts
against the backend: six of them from one key leave the breaker closed, and another key's next
request is answered. Everything runs through `route serve` on loopback against the simulator,
which refuses fields as providers do (backends/simulator/refusals.py): as the provider itself (a
400), or as a LiteLLM proxy refusing a field a client may not set (a 401 "Rejected Request",
which the router used to count as the backend's credential failing, opening its breaker for
every key)."""

from __future__ import annotations

import httpx
import pytest

from router import Router
from router.config_loader import load_config
from router.server import RouteServer

pytestmark = pytest.mark.integration

KEY_A, KEY_B = "key-a-" + "a" * 24, "key-b-" + "b" * 24
MODEL = "refuser"
KINDS = {  # kind -> (model, how the base URL is written)
    "openai": MODEL,
    "anthropic": MODEL,
    "litellm": f"openai/{MODEL}",
}


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("ERR_KEY_A", KEY_A)
    monkeypatch.setenv("ERR_KEY_B", KEY_B)
    monkeypatch.setenv("ERR_UPSTREAM_KEY", "sk-sim-upstream")


def _router(sim, kind: str, **backend) -> Router:
    spec = {"kind": kind, "model": KINDS[kind], "base_url": sim.base_url, "max_retries": 2,
            "api_key": "${ERR_UPSTREAM_KEY}", **backend}
    config = {"backends": {"b": spec},
              "routing": {"tiers": [{"name": "all", "backends": ["b"]}],
                          "breaker": {"failures": 3, "cooldown_ms": 60_000}},
              "server": {"keys": {"a": {"key": "${ERR_KEY_A}"}, "b": {"key": "${ERR_KEY_B}"}}},
              "log": {"enabled": False}}
    return Router(load_config(config), source="server")


def _ask(server: RouteServer, protocol: str, key: str, *, stream: bool = False, **fields) -> httpx.Response:
    root = server.base_url.removesuffix("/v1")
    if protocol == "chat":
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "stream": stream, **fields}
        return httpx.post(f"{root}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {key}"},
                          timeout=30)
    if protocol == "messages":
        body = {"model": "auto", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}], "stream": stream,
                **fields}
        return httpx.post(f"{root}/v1/messages", json=body, headers={"x-api-key": key}, timeout=30)
    body = {"model": "auto", "input": "hi", "stream": stream, **fields}
    return httpx.post(f"{root}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}, timeout=30)


def _refusal(protocol: str, response: httpx.Response) -> tuple[str, str | None]:
    """The error's type and the field it names, from the body in the protocol's own shape."""
    body = response.json()
    if protocol == "messages":
        assert body["type"] == "error"
        return body["error"]["type"], None
    return body["error"]["type"], body["error"]["param"]


@pytest.mark.parametrize("refusal", ["provider", "litellm-proxy"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("protocol", ["chat", "messages", "responses"])
def test_six_refused_requests_from_one_key_leave_the_breaker_closed_for_every_other(sim, keys, kind, protocol, refusal):
    sim.update_profile(MODEL, ttft_s=0.0, tokens_per_s=None, answer_tokens=4, refuses=["top_p"], refusal=refusal)
    router = _router(sim, kind)
    with RouteServer(router) as server:
        for i in range(6):
            refused = _ask(server, protocol, KEY_A, stream=bool(i % 2), top_p=0.5)
            assert refused.status_code == 400, refused.text
            kind_of_error, param = _refusal(protocol, refused)
            assert kind_of_error == "invalid_request_error" and "top_p" in refused.text
            assert param in (None, "top_p") and (protocol == "messages" or param == "top_p")
            assert "retry-after" not in refused.headers
        assert sim.stats(MODEL)["requests"] == 6  # each refusal went upstream once: no retries
        assert router.breakers["b"].state == "closed"
        answered = _ask(server, protocol, KEY_B)
    assert answered.status_code == 200, answered.text


def _closed_after_six(sim, router: Router, upstream_model: str, **fields) -> httpx.Response:
    """Six of `fields` from key A (chat), then key B's plain request; A's last answer is returned."""
    with RouteServer(router) as server:
        for _ in range(6):
            refused = _ask(server, "chat", KEY_A, **fields)
            assert refused.status_code == 400, refused.text
        assert router.breakers["b"].state == "closed"
        calls = sim.stats(upstream_model)["requests"]
        answered = _ask(server, "chat", KEY_B)
    assert answered.status_code == 200, answered.text
    assert sim.stats(upstream_model)["requests"] == calls + 1
    return refused


@pytest.mark.parametrize("kind", ["anthropic", "litellm"])
@pytest.mark.parametrize("beta", [5, ["interleaved-thinking-2025-05-14\nx-injected: 1"]])
def test_an_anthropic_beta_this_kind_cannot_write_is_a_400_naming_it(sim, keys, kind, beta):
    """Before: a TypeError (`5`) or aiohttp's ValueError (the line break) read as the backend
    failing: the breaker opened for every key after three."""
    sim.update_profile(MODEL, ttft_s=0.0, tokens_per_s=None, answer_tokens=4)
    refused = _closed_after_six(sim, _router(sim, kind), MODEL, anthropic_beta=beta)
    assert refused.json()["error"]["param"] == "anthropic_beta"
    assert sim.stats(MODEL)["requests"] == 1  # the six never left the router; B's one did


def test_thinking_blocks_litellm_cannot_write_are_the_requests_fault_and_show_no_traceback(sim, keys):
    """litellm raises APIConnectionError, with its traceback in the message, for a request it
    cannot write (`thinking_blocks: "zzz"` to an Anthropic model): it was read as the backend
    unreachable, and the traceback and server paths went to the client."""
    sim.update_profile(MODEL, ttft_s=0.0, tokens_per_s=None, answer_tokens=4)
    router = _router(sim, "litellm", model=f"anthropic/{MODEL}", base_url=sim.base_url.removesuffix("/v1"))
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x", "thinking_blocks": "zzz"},
             {"role": "user", "content": "again"}]
    refused = _closed_after_six(sim, router, MODEL, messages=turns)
    message = refused.json()["error"]["message"]
    assert "Traceback" not in message and "site-packages" not in message and ".py" not in message, message
    assert "could not be written" in message


def test_a_consortium_whose_members_refuse_the_request_answers_400_and_opens_no_breaker(sim, keys):
    sim.update_profile(MODEL, ttft_s=0.0, tokens_per_s=None, answer_tokens=4, refuses=["top_p"],
                       refusal="litellm-proxy")
    config = {"backends": {"b": {"kind": "openai", "model": MODEL, "base_url": sim.base_url},
                           "judge": {"kind": "openai", "model": "judge-m", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "all", "backends": ["b"]}]},
              "consortia": {"panel": {"members": ["b*2"], "arbiter": "judge", "retries": 1}},
              "server": {"keys": {"a": {"key": "${ERR_KEY_A}"}, "b": {"key": "${ERR_KEY_B}"}}},
              "log": {"enabled": False}}
    router = Router(load_config(config), source="server")
    with RouteServer(router) as server:
        for _ in range(6):
            refused = _ask(server, "chat", KEY_A, model="panel", top_p=0.5)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == "top_p", refused.text
        assert router.breakers["b"].state == "closed"
        answered = _ask(server, "chat", KEY_B, model="panel")
    assert answered.status_code == 200, answered.text
    assert sim.stats(MODEL)["requests"] == 12 + 2  # each member once per request: refusals are not retried


@pytest.mark.parametrize("protocol", ["chat", "messages", "responses"])
def test_every_503_says_when_to_ask_again_in_every_protocol(sim, keys, protocol):
    sim.update_profile(MODEL, ttft_s=0.0, fault="500")
    router = _router(sim, "openai")
    with RouteServer(router) as server:
        for stream in (False, True):
            failed = _ask(server, protocol, KEY_A, stream=stream)
            assert failed.status_code == 503, failed.text
            assert failed.headers["retry-after"] == "1" and failed.headers["retry-after-ms"] == "1000"
