"""Gemma 4 tool calls (DiffusionGemma's protocol) become OpenAI tool calls: the parser on scripted
model output, and the stream filter that keeps call markup out of the shown text."""

from __future__ import annotations

import json

import pytest

from backends.gemma_tools import (
    CALL_CLOSE,
    CALL_OPEN,
    ToolCallSyntaxError,
    extract_tool_calls,
    parse_call,
    tool_call_chunks,
    with_tool_calls,
)
from backends.types import Completion, FinalChunk, TextChunk

pytestmark = pytest.mark.unit

Q = '<|"|>'


def _args(call: dict) -> dict:
    return json.loads(call["function"]["arguments"])


def test_a_call_with_every_kind_of_value():
    body = (f"call:get_weather{{city:{Q}Paris, France{Q},days:3,metric:true,gust:null,ratio:0.5,"
            f"hours:[9,12],where:{{lat:48.8,label:{Q}a {{brace}}, a comma{Q}}}}}")
    call = parse_call(body)
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    assert _args(call) == {"city": "Paris, France", "days": 3, "metric": True, "gust": None, "ratio": 0.5,
                           "hours": [9, 12], "where": {"lat": 48.8, "label": "a {brace}, a comma"}}


def test_empty_arguments_and_spaces():
    assert _args(parse_call("call:now{}")) == {}
    assert _args(parse_call(f" call:f{{ a : 1 , b : {Q}x{Q} }} ")) == {"a": 1, "b": "x"}


@pytest.mark.parametrize("body", ["get_weather{}", "call:f{a:}", "call:f{a:1", f"call:f{{a:{Q}open}}", "call:{a:1}",
                                  "call:f{a:1}trailing"])
def test_malformed_calls_are_refused(body):
    with pytest.raises(ToolCallSyntaxError):
        parse_call(body)


def test_text_keeps_what_is_not_a_well_formed_call():
    text = (f"Let me check.{CALL_OPEN}call:a{{x:1}}{CALL_CLOSE}{CALL_OPEN}call:b{{y:[1,2]}}{CALL_CLOSE}"
            f"{CALL_OPEN}not a call{CALL_CLOSE}")
    rest, calls = extract_tool_calls(text)
    assert [c["function"]["name"] for c in calls] == ["a", "b"]
    assert rest == f"Let me check.{CALL_OPEN}not a call{CALL_CLOSE}"


def test_completion_gets_openai_tool_calls_and_finish_reason():
    completion = Completion(text=f"{CALL_OPEN}call:lookup{{q:{Q}sky{Q}}}{CALL_CLOSE}", backend="b", model="m",
                            finish_reason="stop")
    out = with_tool_calls(completion)
    assert out.text == "" and out.finish_reason == "tool_calls" and _args(out.tool_calls[0]) == {"q": "sky"}
    plain = Completion(text="no calls", backend="b", model="m")
    assert with_tool_calls(plain) is plain


async def test_stream_hides_call_markup_even_split_across_chunks():
    raw = f"Checking.{CALL_OPEN}call:lookup{{q:{Q}sky{Q}}}{CALL_CLOSE}"
    pieces = [raw[i:i + 5] for i in range(0, len(raw), 5)]

    async def source():
        for piece in pieces:
            yield TextChunk(piece)
        yield FinalChunk(Completion(text=raw, backend="b", model="m"))

    chunks = [c async for c in tool_call_chunks(source())]
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "Checking."
    final = chunks[-1].completion
    assert final.text == "Checking." and final.tool_calls[0]["function"]["name"] == "lookup"


async def test_stream_shows_markup_that_is_not_a_call_as_the_final_text_does():
    raw = f"a{CALL_OPEN}oops{CALL_CLOSE}b{CALL_OPEN}never closed"

    async def source():
        for piece in raw:
            yield TextChunk(piece)
        yield FinalChunk(Completion(text=raw, backend="b", model="m"))

    chunks = [c async for c in tool_call_chunks(source())]
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == raw == chunks[-1].completion.text
