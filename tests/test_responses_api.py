"""`route serve`'s OpenAI Responses API through the real `openai` SDK (`responses.create`), routing
to the simulated model server: text and message input, instructions, streaming events, a
function call and its output, usage, and the stateless limits as OpenAI-shaped 400s."""

from __future__ import annotations

import json

import openai
import pytest

from router.server import RouteServer
from router.server.protocols.responses import ResponsesDialect
from tests.helpers import make_router

pytestmark = pytest.mark.integration

TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


@pytest.fixture
def client(sim):
    router = make_router(sim, aliases={"gpt-5-codex": "small"})
    with RouteServer(router) as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0, timeout=20)


def record(sim, model: str, answer: str) -> list:
    seen: list = []
    state = sim.app.state.sim
    state.scripts.pop(model, None)  # a script answers before a responder
    state.profiles[model] = state.profile(model).updated(responder=lambda messages: seen.append(messages) or answer)
    return seen


def test_text_input_and_instructions(client, sim):
    seen = record(sim, "m-small", "four")
    response = client.responses.create(model="auto", instructions="Be terse.", input="2+2?")
    assert response.status == "completed" and response.output_text == "four" and response.model == "auto"
    assert response.usage.output_tokens == 1 and response.usage.input_tokens >= 1
    assert seen == [[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "2+2?"}]]


def test_message_input_with_developer_role_and_parts(client, sim):
    seen = record(sim, "m-small", "ok")
    client.responses.create(model="gpt-5-codex", input=[
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
        {"role": "user", "content": "again"}])
    assert seen == [[{"role": "system", "content": "Rules."}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]]


def test_stream_events(client, sim):
    sim.script("m-small", ["one two three"])
    events = list(client.responses.create(model="auto", input="count", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "one two three"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.output_text == "one two three" and final.usage.output_tokens == 3


@pytest.mark.parametrize("stream", [False, True])
def test_function_call_and_its_output(client, sim, stream):
    sim.script("m-small", [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                           "Sunny in Paris."])
    if stream:
        events = list(client.responses.create(model="auto", input="Weather in Paris?", tools=TOOLS, stream=True))
        deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        assert json.loads(deltas) == {"city": "Paris"}
        response = events[-1].response
    else:
        response = client.responses.create(model="auto", input="Weather in Paris?", tools=TOOLS)
    call = response.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    seen = record(sim, "m-small", "Sunny in Paris.")
    answer = client.responses.create(model="auto", tools=TOOLS, input=[
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "22C, sunny"}])
    assert answer.output_text == "Sunny in Paris."
    assert seen[0][1]["tool_calls"][0]["id"] == call.call_id
    assert seen[0][2] == {"role": "tool", "tool_call_id": call.call_id, "content": "22C, sunny"}


def test_max_output_tokens_makes_it_incomplete(client, sim):
    response = client.responses.create(model="auto", input="talk", max_output_tokens=3)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


@pytest.mark.parametrize(("field", "kwargs"), [
    ("previous_response_id", {"previous_response_id": "resp_123"}),
    ("background", {"background": True}),
])
def test_stateless_limits_are_named_400s(client, field, kwargs):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="auto", input="hi", **kwargs)
    assert refused.value.body["param"] == field and refused.value.body["code"] == "unsupported_parameter"
    assert field in refused.value.body["message"]


def test_namespaced_tools_are_flattened_and_builtin_ones_left_out(client, sim):
    """As Codex sends them: function tools, a namespace of function tools, and web search."""
    seen = []
    answer_with = sim.app.state.sim.scripted_reply
    sim.app.state.sim.scripted_reply = lambda model, messages: seen.append(model) or answer_with(model, messages)
    sim.script("m-small", [{"tool_calls": [{"name": "spawn_agent", "arguments": {"task": "x"}}]}])
    tools = [*TOOLS, {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents",
                      "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
             {"type": "web_search", "external_web_access": False}]
    try:
        events = list(client.responses.create(model="auto", input="Delegate.", tools=tools, stream=True))
    finally:
        del sim.app.state.sim.scripted_reply
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert done[0].type == "function_call" and done[0].name == "spawn_agent"
    assert done[0].model_dump()["namespace"] == "multi_agent_v1"
    assert seen == ["m-small"]
    sent = ResponsesDialect().parse(json.dumps({"model": "auto", "input": "x", "tools": tools}).encode())
    assert [t["function"]["name"] for t in sent.extra["tools"]] == ["get_weather", "spawn_agent"]


def test_unknown_model_is_an_openai_404(client):
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="gpt-9", input="hi")
    assert missing.value.body["code"] == "model_not_found"
