"""Validation at the edge of `route serve` for the Anthropic Messages and OpenAI Responses
endpoints, as test_server_validation.py does it for chat completions: every malformed body is a
4xx JSON error in the API's own shape naming the field, nothing malformed reaches an upstream,
and a few hundred generated bodies (hypothesis) never get a 5xx. Over real sockets, against the
simulator. Before the protocols shared one validator style, wrong types in 14 field paths
answered 500 (a TypeError or AttributeError inside the translation)."""

from __future__ import annotations

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.server import RouteServer
from tests.helpers import make_router

pytestmark = pytest.mark.integration

GOOD_MESSAGES = {"model": "auto", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
GOOD_RESPONSES = {"model": "auto", "input": "hi"}


def _user(*blocks) -> dict:
    return {**GOOD_MESSAGES, "messages": [{"role": "user", "content": list(blocks)}]}


def _input(*items) -> dict:
    return {"model": "auto", "input": list(items)}


# (path, body, the field the refusal must name)
MALFORMED = {
    "text block text 5": ("/v1/messages", _user({"type": "text", "text": 5}), "messages[0].content[0].text"),
    "block type 5": ("/v1/messages", _user({"type": 5}), "messages[0].content[0]"),
    "image source 5": ("/v1/messages", _user({"type": "image", "source": 5}), "messages[0].content[0].source"),
    "image source without data": ("/v1/messages", _user({"type": "image", "source": {"type": "base64"}}),
                                  "messages[0].content[0].source.media_type"),
    "tool_result content 5": ("/v1/messages", _user({"type": "tool_result", "tool_use_id": "t", "content": 5}),
                              "messages[0].content[0].content"),
    "tool_result text 5": ("/v1/messages", _user({"type": "tool_result", "tool_use_id": "t",
                                                  "content": [{"type": "text", "text": 5}]}),
                           "messages[0].content[0].content[0].text"),
    "tool_use input string": ("/v1/messages", {**GOOD_MESSAGES, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]},
        "messages[1].content[0].input"),
    "system 5": ("/v1/messages", {**GOOD_MESSAGES, "system": 5}, "system"),
    "system block text 5": ("/v1/messages", {**GOOD_MESSAGES, "system": [{"type": "text", "text": 5}]},
                            "system[0].text"),
    "tool_choice name missing": ("/v1/messages", {**GOOD_MESSAGES, "tools": [{"name": "f", "input_schema": {}}],
                                                  "tool_choice": {"type": "tool"}}, "tool_choice.name"),
    "max_tokens string": ("/v1/messages", {**GOOD_MESSAGES, "max_tokens": "8"}, "max_tokens"),
    "message content 5": ("/v1/responses", _input({"type": "message", "role": "user", "content": 5}),
                          "input[0].content"),
    "text.format 5": ("/v1/responses", {**GOOD_RESPONSES, "text": {"format": 5}}, "text.format"),
    "input_text text 5": ("/v1/responses", _input({"role": "user", "content": [{"type": "input_text", "text": 5}]}),
                          "input[0].content[0].text"),
    "output_text text 5": ("/v1/responses", _input({"role": "assistant", "content": [{"type": "output_text",
                                                                                      "text": 5}]}),
                           "input[0].content[0].text"),
    "function_call_output output 5": ("/v1/responses", _input({"type": "function_call_output", "call_id": "c",
                                                                "output": 5}), "input[0].output"),
    "function_call arguments object": ("/v1/responses", _input({"type": "function_call", "call_id": "c",
                                                                "name": "f", "arguments": {}}),
                                       "input[0].arguments"),
    "content part type 5": ("/v1/responses", _input({"role": "user", "content": [{"type": 5}]}),
                            "input[0].content[0]"),
    "input 5": ("/v1/responses", {"model": "auto", "input": 5}, "input"),
    # roles the protocol does not have: a client of another protocol's habits, refused by name
    "messages role tool": ("/v1/messages", {**GOOD_MESSAGES, "messages": [{"role": "tool", "content": "42"}]},
                           "messages[0].role"),
    "messages role developer": ("/v1/messages", {**GOOD_MESSAGES, "messages": [
        {"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]}, "messages[0].role"),
    "responses role tool": ("/v1/responses", _input({"type": "message", "role": "tool", "content": "42"}),
                            "input[0].role"),
    "responses role function": ("/v1/responses", _input({"role": "function", "content": "42"}), "input[0].role"),
    "tools string": ("/v1/responses", {**GOOD_RESPONSES, "tools": "x"}, "tools"),
}


@pytest.fixture(scope="module")
def served(sim):
    with RouteServer(make_router(sim)) as srv:
        yield srv


def post(srv, path: str, body: bytes | dict) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return httpx.post(srv.url + path, content=content, timeout=30, headers={"content-type": "application/json"})


def error_of(path: str, response: httpx.Response) -> dict:
    """The error object, checked to be in the shape the path's clients parse."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error"
    error = body["error"]
    assert isinstance(error, dict) and error["message"] and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_fields_are_400s_naming_the_field_that_reach_nothing(served, sim, name):
    path, body, field = MALFORMED[name]
    error = error_of(path, post(served, path, body))
    assert f"`{field}`" in error["message"], error["message"]
    assert sim.stats("m-small")["requests"] == 0 and sim.stats("m-big")["requests"] == 0


def test_count_tokens_is_checked_the_same_way(served):
    error = error_of("/v1/messages/count_tokens", post(served, "/v1/messages/count_tokens",
                                                        _user({"type": "text", "text": 5})))
    assert "`messages[0].content[0].text`" in error["message"]


def test_a_block_type_the_router_cannot_pass_on_is_named(served):
    error = error_of("/v1/messages", post(served, "/v1/messages", _user({"type": "document", "source": {}})))
    assert "'document'" in error["message"]
    error = error_of("/v1/responses", post(served, "/v1/responses",
                                           _input({"type": "item_reference", "id": "x"})))
    assert "'item_reference'" in error["message"]


# -- fuzz ------------------------------------------------------------------------------------

_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=12)
_json = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
_BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "document", "x"])},
    optional={"text": _json, "source": _json, "id": _json, "name": _json, "input": _json, "tool_use_id": _json,
              "content": _json, "is_error": _json, "thinking": _json, "cache_control": _json})
_MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "x"]),
                                  "content": st.lists(_BLOCK, min_size=1, max_size=3) | st.text(max_size=20) | _json})
# The fields a body must get right to reach the translation are right (the cases above and
# test_server_validation.py cover them wrong), so that the fuzz goes deep rather than stopping
# at the first check.
_MESSAGES_BODY = st.fixed_dictionaries(
    {"model": st.sampled_from(["auto", "small"]), "max_tokens": st.integers(1, 64),
     "messages": st.lists(_MESSAGE, min_size=1, max_size=3) | _json},
    optional={k: _json for k in ("system", "tools", "tool_choice", "stream", "temperature", "top_p",
                                 "top_k", "stop_sequences", "thinking", "metadata")})
_PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["input_text", "output_text", "input_image", "refusal", "x"])},
    optional={"text": _json, "image_url": _json, "refusal": _json})
_ITEM = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "developer", "x"])},
    optional={"type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "x"]),
              "content": st.lists(_PART, min_size=1, max_size=3) | st.text(max_size=20) | _json, "call_id": _json,
              "name": _json, "arguments": _json, "output": _json})
_RESPONSES_BODY = st.fixed_dictionaries(
    {"model": st.sampled_from(["auto", "small"]), "input": st.lists(_ITEM, min_size=1, max_size=3)
     | st.text(max_size=20) | _json},
    optional={k: _json for k in ("instructions", "tools", "tool_choice", "text", "max_output_tokens", "temperature",
                                 "top_p", "stream", "reasoning", "parallel_tool_calls", "prompt_cache_key")})
_CASES = (st.tuples(st.just("/v1/messages"), _MESSAGES_BODY.map(orjson.dumps))
          | st.tuples(st.just("/v1/messages/count_tokens"), _MESSAGES_BODY.map(orjson.dumps))
          | st.tuples(st.just("/v1/responses"), _RESPONSES_BODY.map(orjson.dumps))
          | st.tuples(st.sampled_from(["/v1/messages", "/v1/responses"]), st.binary(max_size=64)))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=_CASES)
def test_fuzz_no_body_gets_a_5xx_and_every_error_is_json_in_its_shape(served, case):
    path, body = case
    response = post(served, path, body)
    assert response.status_code < 500, (path, body[:300], response.status_code, response.text[:300])
    if response.status_code != 200 and not response.headers["content-type"].startswith("text/event-stream"):
        error_of(path, response)
