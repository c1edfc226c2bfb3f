"""Validation at the edge of `route serve`: every malformed request is a 4xx with an
OpenAI-shaped JSON error, nothing malformed reaches an upstream or the request log, and even
requests uvicorn would refuse in plain text get JSON. Over real sockets, against the simulator.

The fuzz test sends a few hundred generated malformed bodies (hypothesis): no response may be a
5xx, and every error must be a JSON object with an `error` object."""

from __future__ import annotations

import socket

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.server import RouteServer
from router.store import Store
from tests.helpers import make_router

pytestmark = pytest.mark.integration

FAST = {"ttft_s": 0.0, "tokens_per_s": None}  # answers at once: these tests are about refusals

GOOD = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}

# The malformed requests from the issue, and a few more of each kind.
MALFORMED = {
    "content 42": {"model": "auto", "messages": [{"role": "user", "content": 42}]},
    "content true": {"model": "auto", "messages": [{"role": "user", "content": True}]},
    "content true, forced": {"model": "small", "messages": [{"role": "user", "content": True}]},
    "content object": {"model": "auto", "messages": [{"role": "user", "content": {"text": "hi"}}]},
    "content null": {"model": "auto", "messages": [{"role": "user", "content": None}]},
    "role wizard": {"model": "auto", "messages": [{"role": "wizard", "content": "hi"}]},
    "tools string": {**GOOD, "tools": "x"},
    "response_format 17": {**GOOD, "response_format": 17},
    "nested 1000 deep": (b'{"model": "auto", "messages": [{"role": "user", "content": "hi", "x": '
                         + b"[" * 1000 + b"]" * 1000 + b"}]}"),
    "part of unknown type": {"model": "auto", "messages": [{"role": "user", "content": [{"type": "video"}]}]},
    "tool message without id": {"model": "auto", "messages": [{"role": "tool", "content": "42"}]},
    "temperature as string": {**GOOD, "temperature": "0.5"},
    "max_tokens true": {**GOOD, "max_tokens": True},
    "top_p 3": {**GOOD, "top_p": 3},
    "five stops": {**GOOD, "stop": ["a", "b", "c", "d", "e"]},
    "tool_choice maybe": {**GOOD, "tool_choice": "maybe"},
    "tool with a bad name": {**GOOD, "tools": [{"type": "function", "function": {"name": "two words"}}]},
    "a tool without its function": {**GOOD, "tools": [{"type": "function", "name": "f"}]},
    "model 7": {"model": 7, "messages": GOOD["messages"]},
    "a 100-digit seed": b'{"messages": [{"role": "user", "content": "hi"}], "seed": ' + b"9" * 100 + b"}",
    "an infinite temperature": b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}',
}


@pytest.fixture(scope="module")
def served(sim):
    router = make_router(sim)
    with RouteServer(router) as srv:
        yield srv, router


def post(srv, body: bytes | dict, **headers) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return httpx.post(f"{srv.base_url}/chat/completions", content=content, timeout=30,
                      headers={"content-type": "application/json", **headers})


def assert_json_error(response: httpx.Response) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert isinstance(error, dict) and error["message"] and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_requests_are_400s_that_reach_nothing(served, sim, name):
    srv, router = served
    log_before = Store(router.request_log.path).count() if router.request_log.flush() else None
    error = assert_json_error(post(srv, MALFORMED[name]))
    assert error["code"] == "invalid_request"
    assert sim.stats("m-small")["requests"] == 0 and sim.stats("m-big")["requests"] == 0
    router.request_log.flush()
    assert Store(router.request_log.path).count() == log_before  # nothing logged either


def test_the_refusal_names_the_field_and_what_it_wanted(served):
    srv, _ = served
    error = assert_json_error(post(srv, MALFORMED["content 42"]))
    assert error["param"] == "messages[0].content" and "valid string" in error["message"] and "42" in error["message"]
    error = assert_json_error(post(srv, MALFORMED["role wizard"]))
    assert error["param"] == "messages[0]" and "'wizard'" in error["message"] and "'assistant'" in error["message"]
    error = assert_json_error(post(srv, MALFORMED["tool with a bad name"]))
    assert error["param"] == "tools[0].function.name"


def test_valid_shapes_pass_and_keys_real_clients_add_are_accepted(served, sim):
    """Keys a client adds to a valid object are accepted (issue 29: an older Codex wrote each
    tool's `name` beside its `function`, and was refused every request); what reaches the
    upstream is test_fidelity.py's business."""
    sim.update_profile("m-small", **FAST)
    srv, _ = served
    body = {"model": "small", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "be brief"}]},
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": "and?"}],
        "temperature": 1, "top_p": 0.5, "stop": "x", "seed": 3, "max_completion_tokens": 20,
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}}},
        "tools": [{"type": "function", "name": "shell", "function": {"name": "shell", "parameters": {}}}],
        "some_editor_option": {"anything": True}}
    response = post(srv, body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


def test_a_bug_is_a_json_500_not_plain_text(sim, monkeypatch):
    router = make_router(sim)

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    # a fault inside the app, after validation: in the request scope every request goes through
    monkeypatch.setattr(type(router.scope), "acomplete", explode)
    with RouteServer(router) as srv:
        response = post(srv, {**GOOD, "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal_error"
    assert "boom" not in response.text


# -- requests uvicorn would answer in plain text --------------------------------------------

RAW = {
    "garbage request line": b"HELLO\r\n\r\n",
    "space in the method": b"PO ST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad header name": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n",
    "bad content-length": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n",
    "two content-lengths": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                            b"Content-Length: 3\r\n\r\n{}"),
    "bad chunk size": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"zz\r\nabc\r\n0\r\n\r\n"),
    "control byte in a header": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: \x01\x02\r\n\r\n",
    "http 9": b"POST /v1/chat/completions HTTP/9.9\r\nHost: x\r\n\r\n",
}


def raw_exchange(srv, data: bytes) -> bytes:
    with socket.create_connection((srv.host, srv.port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("name", sorted(RAW))
def test_malformed_http_is_a_json_4xx(served, name):
    srv, _ = served
    reply = raw_exchange(srv, RAW[name])
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert 400 <= status < 500, reply[:300]
    assert b"content-type: application/json" in head.lower()
    assert isinstance(orjson.loads(body)["error"], dict)


# -- fuzz ------------------------------------------------------------------------------------

_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=12)
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
_ROLES = ["system", "developer", "user", "assistant", "tool", "function", "wizard", ""]
_PART = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "input_audio", "file", "refusal", "x"])},
                              optional={"text": _json, "image_url": _json, "input_audio": _json, "file": _json})
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(_ROLES) | _json},
    optional={"content": st.text(max_size=20) | st.lists(_PART, max_size=3) | _json, "tool_calls": _json,
              "tool_call_id": _json, "name": _json, "refusal": _json})
_FIELDS = ["stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop",
           "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed", "tools",
           "tool_choice", "parallel_tool_calls", "response_format", "user", "metadata"]
_BODY = st.fixed_dictionaries(
    {"model": st.sampled_from(["auto", "small", "nope"]) | _json,
     "messages": st.lists(_MESSAGE, max_size=3) | _json},
    optional={name: _json for name in _FIELDS})
_NESTED = st.integers(1, 3000).map(lambda d: b'{"model": "auto", "messages": ' + b"[" * d + b"]" * d + b"}")
_CUT = st.builds(lambda body, at: orjson.dumps(body)[:at], _BODY, st.integers(0, 200))
_BODIES = _BODY.map(orjson.dumps) | _NESTED | _CUT | st.binary(max_size=64)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_BODIES)
def test_fuzz_no_body_gets_a_5xx_and_every_error_is_json(served, body):
    srv, _ = served
    response = post(srv, body)
    assert response.status_code < 500, (body[:300], response.status_code, response.text[:300])
    if response.status_code != 200:
        assert isinstance(response.json()["error"], dict), response.text[:300]


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", {**GOOD, "stream": False, "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {**GOOD, "stream_options": {"include_usage": True}}),
    ("/v1/responses", {"model": "auto", "input": "hi", "stream_options": {"include_obfuscation": False}}),
    ("/v1/messages", {"model": "auto", "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True},
                      "messages": [{"role": "user", "content": "hi"}]}),
])
def test_stream_options_without_a_stream_or_outside_its_protocol_is_a_400_naming_it(sim, path, body):
    """OpenAI refuses `stream_options` unless `stream` is true, and Anthropic has no such field: the
    router says so, in the protocol's shape, rather than pass on a request its upstream refuses."""
    with RouteServer(make_router(sim)) as srv:
        response = httpx.post(f"{srv.url}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    assert "stream_options" in response.text and response.json()["error"]["type"] == "invalid_request_error"
