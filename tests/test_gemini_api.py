"""`route serve`'s Gemini protocol through the real google-genai SDK (`Client(http_options=
{"base_url": ...})`), over real HTTP on loopback, to an upstream that speaks chat completions
and answers as each test scripts it: text with a system instruction and generation settings,
thoughts, a function call round trip (streamed and not), usage as Gemini counts it, the JSON-array
stream, token counts, the model listing, keys as Gemini's clients send them (`x-goog-api-key`,
`?key=`), sessions, and errors in Google's shape."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer

pytestmark = pytest.mark.integration

KEY = "gemini-route-key-0123456789abcdef"
USAGE = {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
         "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 3}}
WEATHER = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="get_weather", description="Weather in a city",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)},
                            required=["city"]))])
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


class Scripted:
    """A chat-completions server: each request gets the next scripted message (content,
    reasoning_content, tool_calls), whole or streamed as the request asks; each body is kept."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.script: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        message = {"role": "assistant", "content": None, **self.script.pop(0)}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        head = {"id": "chatcmpl-1", "created": 0, "model": body["model"]}
        if not body.get("stream"):
            return httpx.Response(200, json={**head, "object": "chat.completion", "usage": USAGE,
                                             "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        deltas = [{"reasoning_content": message["reasoning_content"]}] if message.get("reasoning_content") else []
        deltas += [{"content": word} for word in re.findall(r"\S+\s*", message.get("content") or "")]
        deltas += [{"tool_calls": [{"index": i, **call}]} for i, call in enumerate(message.get("tool_calls") or ())]
        chunks = [{**head, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                  for d in deltas]
        chunks.append({**head, "object": "chat.completion.chunk", "usage": USAGE,
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        return httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})


@pytest.fixture
def upstream(answering: Callable[[Any], str]) -> Iterator[tuple[Scripted, str]]:
    scripted = Scripted()
    yield scripted, answering(scripted)


@pytest.fixture
def server(upstream) -> Iterator[RouteServer]:
    _, base_url = upstream
    backend = {"kind": "openai", "model": "upstream-model", "base_url": base_url, "max_retries": 0, "timeout_s": 20}
    config = {"backends": {"upstream": backend}, "routing": {"tiers": [{"name": "only", "backends": ["upstream"]}]},
              "aliases": {"gemini-*": "auto"}, "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server"), api_key=KEY) as srv:
        yield srv


def _client(server: RouteServer, key: str = KEY) -> genai.Client:
    return genai.Client(api_key=key, http_options=types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=1)))


def _generate(client: genai.Client, stream: bool, contents: Any, config: types.GenerateContentConfig | None = None,
              ) -> tuple[types.GenerateContentResponse, list[types.Part]]:
    """The answer (the last response of a stream) and every part it carried."""
    if not stream:
        response = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
        return response, list(response.candidates[0].content.parts)
    chunks = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents, config=config))
    return chunks[-1], [p for c in chunks for p in c.candidates[0].content.parts or ()]


def _text(parts: list[types.Part], thought: bool = False) -> str:
    return "".join(p.text or "" for p in parts if bool(p.thought) == thought)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_text_with_a_system_instruction_generation_settings_and_usage(server, upstream, stream):
    scripted, _ = upstream
    scripted.script = [{"content": "two plus two is four"}]
    config = types.GenerateContentConfig(system_instruction="Be terse.", temperature=0.2, top_p=0.5, top_k=20,
                                         max_output_tokens=64, stop_sequences=["END"], seed=7, presence_penalty=0.1)
    client = _client(server)
    response, parts = _generate(client, stream, "2+2?", config)
    assert _text(parts) == "two plus two is four"
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    usage = response.usage_metadata
    assert (usage.prompt_token_count, usage.cached_content_token_count, usage.candidates_token_count,
            usage.thoughts_token_count, usage.total_token_count) == (20, 8, 4, 3, 27)
    body = scripted.bodies[0]
    assert body["messages"] == [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}]
    assert (body["temperature"], body["top_p"], body["top_k"], body["stop"], body["seed"], body["presence_penalty"]) \
        == (0.2, 0.5, 20, ["END"], 7, 0.1)
    assert 64 in (body.get("max_tokens"), body.get("max_completion_tokens"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("include", [True, False], ids=["thoughts", "no-thoughts"])
def test_thoughts_come_back_only_when_asked_for(server, upstream, stream, include):
    scripted, _ = upstream
    scripted.script = [{"content": "four", "reasoning_content": "Adding two and two."}]
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=include,
                                                                              thinking_budget=1024))
    client = _client(server)
    _, parts = _generate(client, stream, "2+2?", config)
    assert _text(parts) == "four"
    assert _text(parts, thought=True) == ("Adding two and two." if include else "")
    assert scripted.bodies[0]["reasoning_effort"] == "low"  # a budget of 1024 tokens


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_function_call_round_trip(server, upstream, stream):
    scripted, _ = upstream
    scripted.script = [{"tool_calls": [CALL]}, {"content": "Sunny in Paris."}]
    client = _client(server)
    config = types.GenerateContentConfig(
        tools=[WEATHER], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.ANY)))
    asked = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    response, parts = _generate(client, stream, [asked], config)
    [call] = [p.function_call for p in parts if p.function_call]
    assert (call.id, call.name, call.args) == ("call_1", "get_weather", {"city": "Paris"})
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    first = scripted.bodies[0]
    assert first["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    assert first["tool_choice"] == "required"
    # The SDK sends the function's response without the call's id: matched by name.
    result = types.Part.from_function_response(name="get_weather", response={"result": "sunny"})
    model_turn = types.Content(role="model", parts=[p for p in parts if p.function_call])
    _, parts = _generate(client, stream, [asked, model_turn, types.Content(role="user", parts=[result])], config)
    assert _text(parts) == "Sunny in Paris."
    second = scripted.bodies[1]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "call_1" and json.loads(second[1]["tool_calls"][0]["function"]["arguments"]) \
        == {"city": "Paris"}
    assert second[2] == {"role": "tool", "tool_call_id": "call_1", "content": '{"result":"sunny"}'}


def test_automatic_function_calling_in_a_chat(server, upstream):
    scripted, _ = upstream
    scripted.script = [{"tool_calls": [CALL]}, {"content": "Sunny in Paris."}]

    def get_weather(city: str) -> str:
        """Weather in a city."""
        return f"sunny in {city}"

    client = _client(server)  # held: a Client closes its connections when it is collected
    chat = client.chats.create(model="gemini-2.5-pro", config=types.GenerateContentConfig(tools=[get_weather]))
    assert chat.send_message("Weather in Paris?").text == "Sunny in Paris."
    assert scripted.bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                                  "content": '{"result":"sunny in Paris"}'}


def test_a_stream_without_sse_is_one_json_array(server, upstream):
    scripted, _ = upstream
    scripted.script = [{"content": "one two three"}]
    answer = httpx.post(f"{server.url}/v1beta/models/gemini-2.5-pro:streamGenerateContent",
                        json={"contents": [{"parts": [{"text": "count"}]}]}, headers={"x-goog-api-key": KEY})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    responses = answer.json()
    assert "".join(p["text"] for r in responses for p in r["candidates"][0]["content"]["parts"]) == "one two three"
    assert responses[-1]["candidates"][0]["finishReason"] == "STOP" and responses[-1]["usageMetadata"]["promptTokenCount"] == 20


def test_token_counts_and_the_model_listing(server):
    client = _client(server)
    assert client.models.count_tokens(model="gemini-2.5-pro", contents="hello there").total_tokens >= 1
    listing = httpx.get(f"{server.url}/v1beta/models", headers={"x-goog-api-key": KEY})
    names = [m["name"] for m in listing.json()["models"]]
    assert "models/auto" in names and "models/upstream" in names
    one = httpx.get(f"{server.url}/v1beta/models/auto", headers={"x-goog-api-key": KEY})
    assert one.json()["supportedGenerationMethods"] == ["generateContent", "streamGenerateContent", "countTokens"]


class AccessLines(logging.Handler):
    """The lines `route serve`'s access log writes, whatever else listens to it. A line is
    written just after its answer went out: `wait_for` waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._written = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._written:
            self.lines.append(record.getMessage())
            self._written.notify_all()

    def wait_for(self, start: str) -> str:
        with self._written:
            self._written.wait_for(lambda: any(line.startswith(start) for line in self.lines), timeout=30)
            return next((line for line in self.lines if line.startswith(start)), "")


@contextlib.contextmanager
def access_lines() -> Iterator[AccessLines]:
    access, kept = logging.getLogger("route.access"), AccessLines()
    level = access.level
    access.addHandler(kept)
    access.setLevel(logging.INFO)
    try:
        yield kept
    finally:
        access.removeHandler(kept)
        access.setLevel(level)


def test_keys_as_geminis_clients_send_them(server, upstream):
    scripted, _ = upstream
    scripted.script = [{"content": "ok"}, {"content": "ok"}]
    stranger = _client(server, key="not-the-key-at-all-0000")
    with pytest.raises(errors.ClientError) as wrong:
        stranger.models.generate_content(model="gemini-2.5-pro", contents="hi")
    assert (wrong.value.code, wrong.value.status) == (401, "UNAUTHENTICATED")
    with access_lines() as access:
        answer = httpx.post(f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent", params={"key": KEY},
                            json={"contents": [{"parts": [{"text": "hi"}]}]})
        assert answer.status_code == 200, answer.text
        assert access.wait_for("POST /v1beta/models/gemini-2.5-pro:generateContent 200")
    assert not any(KEY in line for line in access.lines)
    # `?key=` is Gemini's way alone: the other protocols' paths do not read it
    chat = httpx.post(f"{server.url}/v1/chat/completions", params={"key": KEY},
                      json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 401 and chat.json()["error"]["type"] == "authentication_error"
    header = httpx.post(f"{server.url}/v1/chat/completions", headers={"x-goog-api-key": KEY},
                        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert header.status_code == 200


def test_a_session_named_by_header_or_field_or_derived_from_the_task(server, upstream):
    scripted, _ = upstream
    scripted.script = [{"content": "ok"}] * 4
    url = f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "Add type hints to greet.py."}]}]}
    named = httpx.post(url, json=body, headers={"x-goog-api-key": KEY, "x-session-id": "task-42"})
    field = httpx.post(url, json={**body, "session": "task-43"}, headers={"x-goog-api-key": KEY})
    derived = [httpx.post(url, json=body, headers={"x-goog-api-key": KEY}) for _ in range(2)]
    assert "task-42" in named.headers["x-route-session"] and "task-43" in field.headers["x-route-session"]
    assert all("session" not in sent for sent in scripted.bodies)  # route's own field: never sent upstream
    assert derived[0].headers["x-route-session"].startswith("auto-")
    assert derived[0].headers["x-route-session"] == derived[1].headers["x-route-session"]


@pytest.mark.parametrize("body, param", [
    ({"contents": []}, "contents"),
    ({"contents": [{"role": "model", "parts": [{"executableCode": {"code": "print(1)"}}]}]}, "contents[0].parts[0]"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]}, "tools[0].googleSearch"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"temperature": "hot"}}, "generationConfig.temperature"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"candidateCount": 2}},
     "generationConfig.candidateCount"),
    ({"contents": [{"parts": [{"text": "hi"}]}], "cachedContent": "cachedContents/abc"}, "cachedContent"),
])
def test_requests_it_cannot_serve_are_400s_in_googles_shape(server, body, param):
    answer = httpx.post(f"{server.url}/v1beta/models/gemini-2.5-pro:generateContent", json=body,
                        headers={"x-goog-api-key": KEY})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT" and f"`{param}`" in error["message"]


def test_an_unknown_model_or_method_is_a_404_in_googles_shape(server):
    client = _client(server)
    with pytest.raises(errors.ClientError) as unknown:
        client.models.generate_content(model="nope", contents="hi")
    assert (unknown.value.code, unknown.value.status) == (404, "NOT_FOUND") and "aliases" in unknown.value.message
    method = httpx.post(f"{server.url}/v1beta/models/gemini-2.5-pro:embedContent", json={"contents": []},
                        headers={"x-goog-api-key": KEY})
    assert method.status_code == 404 and method.json()["error"]["status"] == "NOT_FOUND"
