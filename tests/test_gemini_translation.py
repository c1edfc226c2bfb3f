"""Gemini's protocol to the router's chat-format call and back (router/server/protocols/gemini.py,
gemini_events.py), shape by shape: what a client can send that the recorded clients and the SDK
tests do not (Google's OpenAPI schemas, responses without ids, images, thinking levels, JSON
output, restricted function calling, snake_case names), what is refused and how it is named, and
the answer's parts, finish reasons and usage."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from backends.types import Completion, ToolCallChunk, Usage
from router.server.errors import ApiError
from router.server.protocols.base import Call
from router.server.protocols.gemini import GeminiDialect, GeminiRoutes
from router.server.protocols.gemini_events import GeminiEvents, response_body, signed_blocks, thought_signature

pytestmark = pytest.mark.unit


def _call(body: dict[str, Any], method: str = "generateContent") -> Call:
    return GeminiDialect("gemini-2.5-pro", method, sse=True).parse(orjson.dumps(body))


def _refused(body: dict[str, Any]) -> ApiError:
    with pytest.raises(ApiError) as refused:
        _call(body)
    return refused.value


def _user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


HI = [_user({"text": "hi"})]


def test_googles_openapi_parameters_become_json_schema():
    parameters = {"type": "OBJECT", "propertyOrdering": ["city", "days"], "required": ["city"], "properties": {
        "city": {"type": "STRING", "description": "a city"},
        "days": {"type": "INTEGER", "nullable": True},
        "units": {"anyOf": [{"type": "STRING", "enum": ["C", "F"]}, {"type": "NULL"}]},
        "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
        "type": {"type": "STRING", "enum": ["OBJECT", "ARRAY"]}, "nullable": {"type": "BOOLEAN"}}}
    call = _call({"contents": HI, "tools": [{"functionDeclarations": [{"name": "forecast", "parameters": parameters}]}]})
    assert call.extra["tools"] == [{"type": "function", "function": {"name": "forecast", "parameters": {
        "type": "object", "required": ["city"], "properties": {
            "city": {"type": "string", "description": "a city"},
            "days": {"type": ["integer", "null"]},
            "units": {"anyOf": [{"type": "string", "enum": ["C", "F"]}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "type": {"type": "string", "enum": ["OBJECT", "ARRAY"]}, "nullable": {"type": "boolean"}}}}}]


def test_responses_without_ids_answer_the_calls_of_the_same_name_in_order():
    model = {"role": "model", "parts": [{"functionCall": {"name": "read", "args": {"path": "a"}}},
                                        {"functionCall": {"name": "read", "args": {"path": "b"}}},
                                        {"functionCall": {"name": "list", "args": {}}}]}
    results = {"role": "function", "parts": [  # the older API's role of such a turn
        {"functionResponse": {"name": "list", "response": {"files": ["a", "b"]}}},
        {"functionResponse": {"name": "read", "response": {"text": "A"}}},
        {"functionResponse": {"name": "read", "response": {"text": "B"}}}]}
    messages = _call({"contents": [_user({"text": "read both"}), model, results]}).messages
    calls = messages[1]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("read", {"path": "a"}), ("read", {"path": "b"}), ("list", {})]
    assert len({c["id"] for c in calls}) == 3
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in messages[2:]] == [
        ("tool", calls[2]["id"], '{"files":["a","b"]}'), ("tool", calls[0]["id"], '{"text":"A"}'),
        ("tool", calls[1]["id"], '{"text":"B"}')]


def test_a_model_turn_keeps_its_thoughts_and_its_text_whole():
    model = {"role": "model", "parts": [{"text": "Let me ", "thought": True}, {"text": "think.", "thought": True},
                                        {"text": "Four", "thoughtSignature": "c2ln"}, {"text": "."},
                                        {"thoughtSignature": "c2ln"}]}
    messages = _call({"systemInstruction": {"parts": [{"text": "Be terse."}, {"text": "Be kind."}]},
                      "contents": [_user({"text": "2+2?"}), model, _user({"text": "and 3+3?"})]}).messages
    assert messages == [{"role": "system", "content": "Be terse.\nBe kind."}, {"role": "user", "content": "2+2?"},
                        {"role": "assistant", "content": "Four.", "reasoning_content": "Let me think."},
                        {"role": "user", "content": "and 3+3?"}]


def test_images_inline_or_by_url_and_what_only_google_can_read():
    messages = _call({"contents": [_user({"text": "what is this?"},
                                         {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                                         {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a.jpg"}})]}).messages
    assert messages[0]["content"] == [{"type": "text", "text": "what is this?"},
                                      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                                      {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}}]
    pdf = _refused({"contents": [_user({"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}})]})
    assert pdf.param == "contents[0].parts[0].inlineData" and "application/pdf" in pdf.message
    upload = _refused({"contents": [_user({"fileData": {
        "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}})]})
    assert upload.param == "contents[0].parts[0].fileData" and "Files API" in upload.message


@pytest.mark.parametrize("thinking, effort", [
    ({"thinkingBudget": 0}, "none"), ({"thinkingBudget": 1024}, "low"), ({"thinkingBudget": 2048}, "medium"),
    ({"thinkingBudget": 24576}, "high"), ({"thinkingBudget": -1}, None), ({"thinkingLevel": "HIGH"}, "high"),
    ({"thinking_level": "low"}, "low"), ({"includeThoughts": True}, None)])
def test_thinking_settings_as_reasoning_effort(thinking, effort):
    call = _call({"contents": HI, "generationConfig": {"thinkingConfig": thinking}})
    assert call.extra.get("reasoning_effort") == effort
    assert call.echo["include_thoughts"] is bool(thinking.get("includeThoughts"))


def test_an_unknown_thinking_level_is_a_400_naming_it():
    refused = _refused({"contents": HI, "generationConfig": {"thinkingConfig": {"thinkingLevel": "EXTREME"}}})
    assert refused.status == 400 and "EXTREME" in refused.message and "thinkingLevel" in refused.message


@pytest.mark.parametrize("config, response_format", [
    ({"responseMimeType": "application/json"}, {"type": "json_object"}),
    ({"responseMimeType": "application/json", "responseJsonSchema": {"type": "object", "properties": {}}},
     {"type": "json_schema", "json_schema": {"name": "response", "schema": {"type": "object", "properties": {}}}}),
    ({"responseMimeType": "application/json", "responseSchema": {"type": "ARRAY", "items": {"type": "STRING"}}},
     {"type": "json_schema", "json_schema": {"name": "response", "schema": {"type": "array", "items": {"type": "string"}}}}),
    ({"responseMimeType": "text/plain"}, None)])
def test_json_output_as_response_format(config, response_format):
    assert _call({"contents": HI, "generationConfig": config}).extra.get("response_format") == response_format


def test_an_output_type_other_backends_cannot_give_is_refused():
    refused = _refused({"contents": HI, "generationConfig": {"responseMimeType": "text/x.enum"}})
    assert refused.param == "generationConfig.responseMimeType"
    assert _refused({"contents": HI, "generationConfig": {"responseModalities": ["IMAGE"]}}).param \
        == "generationConfig.responseModalities"


TOOLS = [{"functionDeclarations": [{"name": "read", "parametersJsonSchema": {"type": "object"}},
                                   {"name": "write", "parametersJsonSchema": {"type": "object"}},
                                   {"name": "shell"}]}]


@pytest.mark.parametrize("config, offered, choice", [
    ({"mode": "AUTO"}, ["read", "write", "shell"], None),
    ({"mode": "ANY"}, ["read", "write", "shell"], "required"),
    ({"mode": "NONE"}, ["read", "write", "shell"], "none"),
    ({"mode": "ANY", "allowedFunctionNames": ["write"]}, ["write"], {"type": "function", "function": {"name": "write"}}),
    ({"mode": "ANY", "allowedFunctionNames": ["read", "shell"]}, ["read", "shell"], "required")])
def test_function_calling_config_as_tool_choice(config, offered, choice):
    call = _call({"contents": HI, "tools": TOOLS, "toolConfig": {"functionCallingConfig": config}})
    assert [t["function"]["name"] for t in call.extra["tools"]] == offered
    assert call.extra.get("tool_choice") == choice
    assert call.extra["tools"][-1]["function"].get("parameters") in ({"type": "object"}, {"type": "object", "properties": {}})


def test_snake_case_names_are_read_as_googles_api_reads_them():
    call = _call({"system_instruction": {"parts": [{"text": "Be terse."}]}, "contents": HI,
                  "generation_config": {"max_output_tokens": 5, "stop_sequences": ["."], "top_k": 3.0},
                  "tools": [{"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}],
                  "tool_config": {"function_calling_config": {"mode": "NONE"}}})
    assert call.messages[0] == {"role": "system", "content": "Be terse."}
    assert (call.max_tokens, call.stop, call.extra["top_k"], call.extra["tool_choice"]) == (5, ["."], 3, "none")


def test_the_path_says_the_model_the_method_and_the_framing():
    routes = GeminiRoutes("/v1beta/models/")
    streamed = routes.bind({"path": "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "query_string": b"alt=sse"})
    assert isinstance(streamed, GeminiDialect) and (streamed.model, streamed.sse) == ("gemini-2.5-pro", True)
    call = streamed.parse(orjson.dumps({"contents": HI}))
    assert call.stream and call.model == "gemini-2.5-pro"
    array = routes.bind({"path": "/v1beta/models/auto:streamGenerateContent", "query_string": b""})
    assert isinstance(array, GeminiDialect) and not array.sse
    whole = routes.bind({"path": "/v1beta/models/auto:generateContent", "query_string": b"alt=sse"})
    assert isinstance(whole, GeminiDialect) and not whole.parse(orjson.dumps({"contents": HI})).stream


def _completion(**fields: Any) -> Completion:
    return Completion(text=fields.pop("text", ""), backend="b", model="m", **fields)


def test_the_answer_in_geminis_shape():
    call = Call(model="gemini-2.5-pro", messages=[], echo={"include_thoughts": True})
    completion = _completion(text="Sunny.", thinking="Look it up.", finish_reason="length",
                             tool_calls=[{"id": "call_1", "type": "function",
                                          "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}],
                             usage=Usage(input_tokens=100, output_tokens=30, thinking_tokens=10, cache_read_tokens=60))
    body = json.loads(response_body(call, completion, {"downgraded": {"from": "heavy"}}))
    candidate = body["candidates"][0]
    assert candidate["content"] == {"role": "model", "parts": [
        {"text": "Look it up.", "thought": True}, {"text": "Sunny."},
        {"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}}]}
    assert candidate["finishReason"] == "MAX_TOKENS"
    assert body["usageMetadata"] == {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 130,
                                     "cachedContentTokenCount": 60, "thoughtsTokenCount": 10}
    assert body["modelVersion"] == "gemini-2.5-pro" and body["route"] == {"downgraded": {"from": "heavy"}}
    quiet = json.loads(response_body(Call(model="m", messages=[]), _completion(text="Sunny.", thinking="hm"), None))
    assert quiet["candidates"][0]["content"]["parts"] == [{"text": "Sunny."}]
    assert quiet["candidates"][0]["finishReason"] == "STOP" and "route" not in quiet


def test_a_stream_sends_each_function_call_whole_with_the_last_response():
    events = GeminiEvents(Call(model="m", messages=[]), sse=True)
    out = events.start() + events.text("Checking. ")
    out += events.tool_call(ToolCallChunk(index=0, id="call_1", name="weather", arguments='{"ci'))
    out += events.tool_call(ToolCallChunk(index=0, arguments='ty": "Paris"}'))
    out += events.finish(None, None)
    responses = [json.loads(line[len(b"data: "):]) for line in out.split(b"\r\n\r\n") if line]
    assert [r["candidates"][0]["content"]["parts"] for r in responses] == [
        [{"text": "Checking. "}], [{"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}}]]
    assert responses[-1]["candidates"][0]["finishReason"] == "STOP"


def test_a_stream_without_sse_is_one_json_array_even_when_it_fails():
    events = GeminiEvents(Call(model="m", messages=[]), sse=False)
    out = events.start() + events.text("one ") + events.text("two")
    failed = out + events.error(ApiError(503, "every backend failed"))
    assert [r.get("error", {}).get("status") for r in json.loads(failed)] == [None, None, "UNAVAILABLE"]
    whole = json.loads(out + events.finish(_completion(text="one two"), None))
    assert whole[-1]["usageMetadata"]["totalTokenCount"] == 0 and len(whole) == 3


def test_routes_own_fields_and_the_operators_as_in_every_protocol():
    call = _call({"contents": HI, "deadline_s": 5, "prefer": "fast", "max_cost_usd": 0.01, "session": "task-1"})
    assert call.route == {"deadline_s": 5, "prefer": "fast", "max_cost_usd": 0.01} and call.session == "task-1"
    assert "deadline_s" not in call.extra and "session" not in call.extra
    assert _refused({"contents": HI, "prefer": "free"}).param == "prefer"
    assert _refused({"contents": HI, "api_base": "http://elsewhere"}).param == "api_base"


def test_only_a_thought_signature_route_wrote_brings_thinking_blocks_back():
    blocks = [{"type": "thinking", "thinking": "Run it.", "signature": "sig-1"}, {"type": "redacted_thinking", "data": "x"}]
    ours = thought_signature(blocks)
    assert signed_blocks(ours) == blocks
    for other in ("c2lnbmF0dXJlLXBsYWNlaG9sZGVy", "skip_thought_signature_validator", "", None):  # Google's, Gemini CLI's
        assert signed_blocks(other) == []
    model = {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": ours}]}
    messages = _call({"contents": [_user({"text": "go"}), model, _user({"functionResponse": {
        "id": "c1", "name": "f", "response": {}}})]}).messages
    assert messages[1]["thinking_blocks"] == blocks
    google = {"role": "model", "parts": [{"functionCall": {"name": "f"}, "thoughtSignature": "c2lnbmF0dXJl"}]}
    assert "thinking_blocks" not in _call({"contents": [_user({"text": "go"}), google]}).messages[1]
