"""Where a request goes and with which credential is the operator's, and what the config sets the
config decides (backends/client_fields.py), on every kind and at every entry point.

The upstream is a real loopback server that records every request (body and headers) and
answers as an OpenAI-compatible server or as Anthropic, by path; a second loopback server, the
`listener`, stands for the address a client would like the key sent to: nothing may reach it.
Each kind -- `openai` (what a LiteLLM proxy allowing client-side credentials sits behind),
`anthropic`, `litellm` (through real litellm, `openai/` provider) -- is driven both directly
(the backend leaves such fields out even when handed them) and through `route serve` in each
protocol (the field is refused with a 400 naming it, before anything is routed).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backends import build_backend
from backends.base import BackendSettings
from backends.client_fields import operator_owned, refusal
from backends.errors import BadRequest, ConfigError
from backends.types import Price, Request
from router import Router
from router.config_loader import load_config
from router.server import RouteServer
from tests.answering import answering

pytestmark = pytest.mark.integration

KEY_VAR = "ROUTE_TEST_PROVIDER_KEY"
PROVIDER_KEY = "sk-provider-0123456789abcdefXYZ"
KINDS = ("openai", "anthropic", "litellm")


class Recorder:
    """Every request as (path, headers, body); answers as OpenAI or Anthropic by path."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.seen.append((request.url.path, dict(request.headers), body))
        if request.url.path.endswith("/messages"):
            return httpx.Response(200, json={
                "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 1}})
        return httpx.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

    @property
    def body(self) -> dict[str, Any]:
        return self.seen[-1][2]

    @property
    def headers(self) -> dict[str, str]:
        return self.seen[-1][1]


@pytest.fixture
def upstream(monkeypatch) -> Iterator[tuple[Recorder, str]]:
    monkeypatch.setenv(KEY_VAR, PROVIDER_KEY)
    recorder = Recorder()
    with answering(recorder) as url:
        yield recorder, url


@pytest.fixture
def listener() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with answering(recorder) as url:
        yield recorder, url


def _model(kind: str) -> str:
    return "openai/upstream-model" if kind == "litellm" else "upstream-model"


def _backend(kind: str, url: str, **settings: Any):
    return build_backend(kind, BackendSettings(name=kind, model=_model(kind), base_url=url, api_key_env=KEY_VAR,
                                               max_retries=0, **settings))


def _smuggled(listener_url: str) -> dict[str, Any]:
    """What a client sends to have the provider key go elsewhere."""
    return {"api_base": listener_url, "base_url": listener_url, "api_key": "sk-client-chosen-000000000000",
            "extra_headers": {"x-route-to": listener_url}, "custom_llm_provider": "openai",
            "aws_secret_access_key": "client-aws-secret"}


# -- the rule -------------------------------------------------------------------------------------


def test_the_operators_fields_are_known_by_name_and_the_clients_are_not_mistaken_for_them():
    for name in ("api_base", "base_url", "api_key", "extra_headers", "headers", "custom_llm_provider", "organization",
                 "aws_secret_access_key", "vertex_credentials", "azure_ad_token", "user_config", "mock_response"):
        assert operator_owned(name), name
    for name in ("max_tokens", "prompt_cache_key", "metadata", "user", "tools", "reasoning_effort", "top_k",
                 "chat_template_kwargs", "service_tier", "safety_identifier", "anthropic_beta"):
        assert not operator_owned(name), name
    assert refusal({"temperature": 1, "api_key": "x"}) == ("api_key", refusal({"api_key": 1})[1])  # type: ignore[index]
    assert refusal({"service_tier": "priority"})[0] == "service_tier"  # type: ignore[index]
    assert refusal({"service_tier": "flex", "anthropic_beta": ["a-1"]}) is None
    assert refusal({"anthropic_beta": 5})[0] == "anthropic_beta"  # type: ignore[index]
    assert refusal({"anthropic_beta": ["ok", "bad\r\nx-injected: 1"]})[0] == "anthropic_beta"  # type: ignore[index]


# -- every kind leaves them out, even when handed them --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_no_kind_sends_a_clients_endpoint_key_or_headers_anywhere(kind, upstream, listener):
    recorder, url = upstream
    heard, listener_url = listener
    backend = _backend(kind, url)
    try:
        completion = await backend.complete(Request(messages=[{"role": "user", "content": "hi"}],
                                                    extra=_smuggled(listener_url)))
    finally:
        await backend.aclose()
    assert completion.text == "ok"
    assert heard.seen == []  # the address the client chose heard nothing
    path, headers, body = recorder.seen[-1]
    assert not set(_smuggled(listener_url)) & set(body), body
    assert "x-route-to" not in headers and "client-chosen" not in json.dumps(headers)
    assert PROVIDER_KEY in json.dumps(headers)  # the operator's key went where the operator said


# -- what the config sets, the config decides -----------------------------------------------------

CONFIGURED = {
    "openai": ({"params": {"temperature": 0.2, "max_tokens": 48}, "passthrough": {"max_denoising_steps": 48}},
               {"max_denoising_steps": 100000, "max_completion_tokens": 9000}),
    "anthropic": ({"params": {"temperature": 0.2, "top_k": 5, "max_tokens": 48}, "passthrough": {}},
                  {"top_k": 500}),
    "litellm": ({"params": {"temperature": 0.2, "max_tokens": 48}, "passthrough": {"seed": 48}},
                {"seed": 100000}),
}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_configured_param_is_not_overridden_by_the_client(kind, upstream):
    recorder, url = upstream
    settings, client = CONFIGURED[kind]
    backend = _backend(kind, url, **settings)
    request = Request(messages=[{"role": "user", "content": "hi"}], max_tokens=9000, temperature=0.9, extra=client)
    try:
        await backend.complete(request)
        body = recorder.body
        assert (body["temperature"], body["max_tokens"]) == (0.2, 48)
        assert "max_completion_tokens" not in body  # the alias would have won at the upstream
        for name, value in {**settings["params"], **settings["passthrough"]}.items():
            assert body[name] == value, name
        # Unless the config says the field is the client's: then the configured value is a default.
        mine = _backend(kind, url, client_params=frozenset({"temperature"}), **settings)
        await mine.complete(request)
        assert recorder.body["temperature"] == 0.9
        assert recorder.body["max_tokens"] == 48
        await mine.aclose()
    finally:
        await backend.aclose()


def test_client_params_must_name_a_configured_field():
    spec = {"backends": {"b": {"kind": "openai", "model": "m", "params": {"temperature": 0.2},
                               "client_params": ["temprature"]}},
            "routing": {"tiers": [{"name": "all", "backends": ["b"]}]}}
    with pytest.raises(ConfigError, match="client_params names 'temprature', which neither params nor passthrough"):
        load_config(spec)


# -- route serve refuses them, in each protocol ---------------------------------------------------


def _config(url: str) -> dict[str, Any]:
    backends = {kind: {"kind": kind, "model": _model(kind), "base_url": url, "api_key": f"${{{KEY_VAR}}}",
                       "max_retries": 0, "price": {"input": 1.0, "output": 1.0}, **CONFIGURED[kind][0]}
                for kind in KINDS}
    return {"backends": backends, "routing": {"tiers": [{"name": "all", "backends": ["openai"]}]}}


@pytest.fixture
def served(upstream) -> Iterator[tuple[httpx.Client, Recorder]]:
    recorder, url = upstream
    router = Router(load_config(_config(url)), log=False)
    with RouteServer(router) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client, recorder


def _body(path: str, model: str, **fields: Any) -> dict[str, Any]:
    if path == "/v1/messages":
        return {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}], **fields}
    if path == "/v1/responses":
        return {"model": model, "input": "hi", **fields}
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **fields}


def _error(path: str, response: httpx.Response) -> str:
    body = response.json()
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        return body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]["param"] + ": " + body["error"]["message"]


PATHS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", PATHS)
def test_route_serve_refuses_a_clients_endpoint_key_or_headers_and_calls_nothing(served, listener, kind, path):
    client, recorder = served
    heard, listener_url = listener
    for field in ("api_base", "base_url", "api_key", "extra_headers"):
        value = {"x-route-to": listener_url} if field == "extra_headers" else listener_url
        response = client.post(path, json=_body(path, kind, **{field: value}))
        assert response.status_code == 400, response.text
        assert f"`{field}` is not a client's to set" in _error(path, response)
    assert recorder.seen == [] and heard.seen == []
    assert client.post(path, json=_body(path, kind)).status_code == 200  # the same request without them
    assert recorder.seen and heard.seen == []


@pytest.mark.parametrize("kind", KINDS)
def test_through_route_serve_the_configured_param_wins(served, kind):
    client, recorder = served
    settings, fields = CONFIGURED[kind]
    body = _body("/v1/chat/completions", kind, temperature=0.9, max_tokens=9000, **fields)
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    for name, value in {**settings["params"], **settings["passthrough"]}.items():
        assert recorder.body[name] == value, name


@pytest.mark.parametrize("path", PATHS)
def test_a_service_tier_billed_above_the_counted_price_is_refused(served, path):
    client, recorder = served
    response = client.post(path, json=_body(path, "openai", service_tier="priority"))
    assert response.status_code == 400 and "`service_tier` 'priority' is billed above" in _error(path, response)
    assert recorder.seen == []
    tier = "standard_only" if path == "/v1/messages" else "flex"
    assert client.post(path, json=_body(path, "openai", service_tier=tier)).status_code == 200
    assert recorder.body["service_tier"] == tier


@pytest.mark.parametrize("beta", [5, "interleaved-thinking", ["ok", "bad\nx-injected: 1"]])
def test_a_malformed_anthropic_beta_is_a_400_naming_it_never_a_500(served, beta):
    client, recorder = served
    body = _body("/v1/chat/completions", "anthropic", anthropic_beta=beta)
    response = client.post("/v1/chat/completions", json=body, headers={"anthropic-beta": "context-1m-2025-08-07"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "anthropic_beta", response.text
    assert recorder.seen == []
    good = _body("/v1/chat/completions", "anthropic", anthropic_beta=["interleaved-thinking-2025-05-14"])
    assert client.post("/v1/chat/completions", json=good, headers={"anthropic-beta": "context-1m-2025-08-07"}
                       ).status_code == 200
    assert recorder.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14,context-1m-2025-08-07"


# -- every spelling, inside metadata, a LiteLLM proxy's own list; what changes the bill (issue 47) --

SPELLED = ["baseURL", "BASE_URL", "base-url", "ApiKey", "provider_specific_header", "ssl_verify", "deployment_url",
           "langfuse_host", "slack_webhook_url", "s3_endpoint_url", "secret_fields", "mock_testing_fallbacks",
           "input_cost_per_token", "aws_profile_name", "user_config"]
_SCHEMA = {"type": "object", "properties": {"api_key": {"type": "string"}, "base_url": {"type": "string"}}}
A_TOOL = {"type": "function", "function": {"name": "login", "parameters": _SCHEMA}}  # properties a model fills in


def _tool(path: str) -> dict[str, Any]:
    if path == "/v1/messages":
        return {"name": "login", "input_schema": _SCHEMA}
    return {"type": "function", "name": "login", "parameters": _SCHEMA} if path == "/v1/responses" else A_TOOL


def test_the_operators_fields_are_known_in_any_spelling_and_inside_what_a_proxy_reads():
    for name in SPELLED:
        assert operator_owned(name), name
    assert refusal({"metadata": {"user_id": "u-1", "api_base": "http://x"}})[0] == "metadata.api_base"  # type: ignore[index]
    assert refusal({"litellm_metadata": {"langfuse_host": "h"}})[0] == "litellm_metadata.langfuse_host"  # type: ignore[index]
    for tier in ("PRIORITY", "Scale", " priority", "ultrafast"):
        assert refusal({"service_tier": tier})[0] == "service_tier", tier  # type: ignore[index]
    # The neighbours: a client's own fields, in metadata too, and a tool whose properties share the names.
    assert refusal({"metadata": {"user_id": "u-1", "team": "a"}, "temperature": 0.2, "tools": [A_TOOL],
                    "top_k": 5, "reasoning_effort": "low", "prompt_cache_key": "k"}) is None
    for tier in ("auto", "DEFAULT", "Flex", "standard_only"):
        assert refusal({"service_tier": tier}) is None, tier


@pytest.mark.parametrize("path", PATHS)
def test_route_serve_refuses_them_in_any_spelling_and_nested_and_lets_the_neighbours_through(served, listener, path):
    client, recorder = served
    heard, listener_url = listener
    for fields, named in [({"baseURL": listener_url}, "baseURL"), ({"BASE_URL": listener_url}, "BASE_URL"),
                          ({"metadata": {"api_base": listener_url}}, "metadata.api_base"),
                          ({"provider_specific_header": {"custom_llm_provider": "openai", "extra_headers": {}}},
                           "provider_specific_header"), ({"slack_webhook_url": listener_url}, "slack_webhook_url")]:
        response = client.post(path, json=_body(path, "openai", **fields))
        assert response.status_code == 400 and f"`{named}` is not a client's to set" in _error(path, response), fields
    response = client.post(path, json=_body(path, "openai", service_tier="PRIORITY"))
    assert response.status_code == 400 and "`service_tier` 'PRIORITY' is billed above" in _error(path, response)
    assert recorder.seen == [] and heard.seen == []
    fine = client.post(path, json=_body(path, "openai", metadata={"user_id": "u-1"}, temperature=0.3,
                                        tools=[_tool(path)]))
    assert fine.status_code == 200, fine.text


def _long_answer(input_tokens: int) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        return httpx.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": input_tokens, "output_tokens": 1000}})
    return answer


@pytest.mark.parametrize(("input_tokens", "cost"), [(150_000, (150_000 * 3 + 1000 * 15) / 1e6),
                                                    (250_000, (250_000 * 3 * 2 + 1000 * 15 * 1.5) / 1e6)])
async def test_the_anthropic_kind_sends_a_1m_context_beta_and_counts_its_price(monkeypatch, input_tokens, cost):
    monkeypatch.setenv(KEY_VAR, PROVIDER_KEY)
    with answering(_long_answer(input_tokens)) as url:
        backend = _backend("anthropic", url, price=Price(3.0, 15.0))
        try:
            completion = await backend.complete(Request(messages=[{"role": "user", "content": "hi"}],
                                                        extra={"anthropic_beta": ["context-1m-2025-08-07"]}))
        finally:
            await backend.aclose()
    assert completion.cost_usd == pytest.approx(cost)  # past 200k: input at 2x, output at 1.5x


async def test_the_litellm_kind_cannot_count_a_1m_context_beta_and_refuses_it_naming_it(upstream):
    recorder, url = upstream
    backend = _backend("litellm", url)
    try:
        with pytest.raises(BadRequest, match="context-1m-2025-08-07.* billed above") as refused:
            await backend.complete(Request(messages=[{"role": "user", "content": "hi"}],
                                           extra={"anthropic_beta": ["context-1m-2025-08-07"]}))
        assert refused.value.param == "anthropic_beta" and recorder.seen == []
        fine = await backend.complete(Request(messages=[{"role": "user", "content": "hi"}],
                                              extra={"anthropic_beta": ["prompt-caching-2024-07-31"]}))
    finally:
        await backend.aclose()
    assert fine.text == "ok" and recorder.headers["anthropic-beta"] == "prompt-caching-2024-07-31"


BAD_ROUTE_VALUES = [("deadline_s", "soon"), ("deadline_s", 0), ("prefer", "free"), ("max_cost_usd", -1),
                    ("max_cost_usd", True)]


@pytest.mark.parametrize("path", PATHS)
def test_route_fields_the_router_cannot_use_are_400s_naming_them_and_good_ones_are_honoured(served, path):
    client, recorder = served
    for field, value in BAD_ROUTE_VALUES:
        response = client.post(path, json=_body(path, "openai", **{field: value}))
        assert response.status_code == 400 and f"`{field}`" in _error(path, response), (field, response.text)
    assert recorder.seen == []
    # The router's options, as the Python API takes them: a cost limit below every candidate is
    # the request's own refusal (400, nothing called), never a 500.
    response = client.post(path, json=_body(path, "openai", max_cost_usd=1e-12))
    assert response.status_code == 400 and "max_cost_usd" in _error(path, response), response.text
    assert recorder.seen == []
    fine = client.post(path, json=_body(path, "openai", deadline_s=30, prefer="fast", max_cost_usd=1.0))
    assert fine.status_code == 200 and not {"deadline_s", "prefer", "max_cost_usd"} & set(recorder.body)


# -- the Python API -------------------------------------------------------------------------------


async def test_the_python_api_refuses_them_by_name(upstream, listener):
    recorder, url = upstream
    heard, listener_url = listener
    router = Router(load_config(_config(url)), log=False)
    try:
        for field, value in _smuggled(listener_url).items():
            with pytest.raises(ValueError, match=f"`{field}` is not a client's to set"):
                await router.acomplete("hi", extra={field: value})
        with pytest.raises(ValueError, match="`service_tier` 'priority'"):
            await router.acomplete("hi", extra={"service_tier": "priority"})
    finally:
        await router.aclose()
    assert recorder.seen == [] and heard.seen == []


def test_the_local_engines_configured_settings_win_over_the_clients_and_their_meanings():
    from backends.diffusion.local import generation_overrides, operator_request, thinking_flag

    settings = BackendSettings(name="local", model="m", params={"max_denoising_steps": 48, "thinking": False,
                                                               "t_max": 0.5})
    asked = Request(messages=[{"role": "user", "content": "hi"}], max_tokens=64, temperature=1.5,
                    extra={"max_denoising_steps": 100000, "reasoning_effort": "high", "max_completion_tokens": 64})
    request = operator_request(asked, settings)
    overrides, _ = generation_overrides(request, settings.params)
    assert overrides["max_denoising_steps"] == 48 and overrides["t_max"] == 0.5  # not 100000, not 1.5
    assert overrides["max_new_tokens"] == 64  # the limit itself is the client's: max_new_tokens is not configured
    assert thinking_flag(request, settings.params) is False  # reasoning_effort means thinking, which is configured
    mine = BackendSettings(name="local", model="m", params={"t_max": 0.5}, client_params=frozenset({"t_max"}))
    assert generation_overrides(operator_request(asked, mine), mine.params)[0]["t_max"] == 1.5
