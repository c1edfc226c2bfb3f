"""`route serve`'s Anthropic Messages API through the real `anthropic` SDK, routing to the
simulated model server: plain and streamed answers, system prompts, multi-turn, a tool-use round
trip (the simulator streams the call in pieces), stop reasons, usage, count_tokens, aliases,
x-api-key auth, and errors in Anthropic's shape."""

from __future__ import annotations

import anthropic
import pytest

from router.server import RouteServer
from tests.helpers import make_router

pytestmark = pytest.mark.integration

TOKEN = "t" * 32
WEATHER = {"name": "get_weather", "description": "Weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture
def server(sim):
    router = make_router(sim, aliases={"claude-sonnet-4-6": "auto", "claude-haiku-*": "small"})
    with RouteServer(router, api_key=TOKEN) as srv:
        yield srv


@pytest.fixture
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key=TOKEN, max_retries=0, timeout=20)


def ask(client, **kw):
    kw.setdefault("model", "auto")
    kw.setdefault("max_tokens", 200)
    kw.setdefault("messages", [{"role": "user", "content": "2+2?"}])
    return client.messages.create(**kw)


def test_plain_answer_with_usage_and_stop_reason(client, sim):
    sim.script("m-small", ["four"])
    message = ask(client)
    assert message.type == "message" and message.role == "assistant" and message.model == "auto"
    assert [b.type for b in message.content] == ["text"] and message.content[0].text == "four"
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens >= 1 and message.usage.output_tokens == 1


def test_system_prompt_and_turns_reach_the_backend_in_chat_format(client, sim):
    seen = []
    sim.app.state.sim.profiles["m-small"] = sim.app.state.sim.profile("m-small").updated(
        responder=lambda messages: seen.append(messages) or "ok")
    ask(client, system=[{"type": "text", "text": "Be terse."}],
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                  {"role": "user", "content": [{"type": "text", "text": "2+2?"}]}])
    assert seen == [[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello"}, {"role": "user", "content": "2+2?"}]]


def test_max_tokens_stop_reason(client, sim):
    message = ask(client, max_tokens=3)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_stream_events_in_anthropic_order(client, sim):
    sim.script("m-small", ["one two three"])
    with client.messages.stream(model="auto", max_tokens=100, messages=[{"role": "user", "content": "count"}]) as s:
        kinds = [event.type for event in s]
        final = s.get_final_message()
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
    assert final.content[0].text == "one two three" and final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 3


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round_trip(client, sim, stream):
    sim.script("m-small", [{"content": "Checking.", "tool_calls": [{"name": "get_weather",
                                                                    "arguments": {"city": "Paris"}}]},
                           "Sunny in Paris."])
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        with client.messages.stream(model="auto", max_tokens=100, tools=[WEATHER], messages=messages) as s:
            first = s.get_final_message()
    else:
        first = ask(client, tools=[WEATHER], messages=messages)
    assert first.stop_reason == "tool_use"
    text, use = first.content
    assert text.text == "Checking." and use.type == "tool_use"
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id
    seen = []
    answer_with = sim.app.state.sim.scripted_reply
    sim.app.state.sim.scripted_reply = lambda model, msgs: seen.append(msgs) or answer_with(model, msgs)
    try:
        second = ask(client, tools=[WEATHER], messages=[
            *messages, {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "22C, sunny"}]}])
    finally:
        del sim.app.state.sim.scripted_reply
    assert second.content[0].text == "Sunny in Paris." and second.stop_reason == "end_turn"
    assistant, result = seen[0][1], seen[0][2]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert result == {"role": "tool", "tool_call_id": use.id, "content": "22C, sunny"}


def test_count_tokens(client):
    small = client.messages.count_tokens(model="auto", messages=[{"role": "user", "content": "hi"}])
    large = client.messages.count_tokens(model="auto", messages=[{"role": "user", "content": "hi " * 400}],
                                         tools=[WEATHER])
    assert 1 <= small.input_tokens < large.input_tokens


def test_alias_exact_and_glob(client, sim):
    sim.script("m-small", ["from small"])
    assert ask(client, model="claude-sonnet-4-6").model == "claude-sonnet-4-6"
    assert ask(client, model="claude-haiku-4-5-20251001").content[0].text == "from small"


def test_errors_in_anthropic_shape(client, server):
    with pytest.raises(anthropic.NotFoundError) as missing:
        ask(client, model="claude-opus-4")
    assert missing.value.body["type"] == "error" and missing.value.body["error"]["type"] == "not_found_error"
    assert "aliases" in missing.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as bad:
        ask(client, messages=[{"role": "robot", "content": "x"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error" and "`messages[0].role`" in str(bad.value)
    wrong = anthropic.Anthropic(base_url=server.url, api_key="wrong" * 8, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        ask(wrong)
    assert denied.value.body["error"]["type"] == "authentication_error"


def test_bearer_auth_works_too(server, sim):
    sim.script("m-small", ["ok"])
    bearer = anthropic.Anthropic(base_url=server.url, auth_token=TOKEN, max_retries=0)
    assert ask(bearer).content[0].text == "ok"


def test_upstream_failure_is_an_anthropic_error(client, sim):
    sim.set_faults("m-small", ["500"] * 8)
    with pytest.raises(anthropic.APIStatusError) as failed:
        ask(client, model="small")
    assert failed.value.status_code == 503
    assert failed.value.body["type"] == "error" and failed.value.body["error"]["type"] == "overloaded_error"


def test_system_turns_inside_messages(client, sim):
    """Claude Code sends mid-conversation instructions as `system` turns in `messages`."""
    seen = []
    sim.app.state.sim.profiles["m-small"] = sim.app.state.sim.profile("m-small").updated(
        responder=lambda messages: seen.append(messages) or "ok")
    ask(client, messages=[{"role": "user", "content": "hi"},
                          {"role": "system", "content": [{"type": "text", "text": "Agents: explore, plan."}]}])
    assert seen == [[{"role": "user", "content": "hi"}, {"role": "system", "content": "Agents: explore, plan."}]]
