"""Streams yield tool calls as they form: ToolCallChunks (id and name first, then the arguments
in pieces), and the FinalChunk's Completion.tool_calls holds each call whole, as before."""

from __future__ import annotations

import pytest

from backends.types import FinalChunk, ToolCallChunk
from tests.helpers import WEATHER_CALL, adapter_config

pytestmark = pytest.mark.integration

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


async def test_a_streamed_tool_call_arrives_in_pieces_that_add_up_to_the_final_call(sim):
    from router.core import Router

    sim.update_profile("sim-light", ttft_s=0.01, tokens_per_s=100)  # pieces paced like tokens
    sim.script("sim-light", [WEATHER_CALL])
    async with Router.from_config(adapter_config(sim)) as router:
        chunks = [c async for c in router.astream("Weather in Paris?", tools=TOOLS)]
    pieces = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert len(pieces) > 2
    assert (pieces[0].index, pieces[0].id, pieces[0].name) == (0, "call_w1", "get_weather")
    assert all(p.id is None and p.name is None for p in pieces[1:])
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.completion.finish_reason == "tool_calls"
    assert final.completion.tool_calls == [{"id": "call_w1", "type": "function", "function": {
        "name": "get_weather", "arguments": "".join(p.arguments for p in pieces)}}]
    assert final.completion.tool_calls[0]["function"]["arguments"] == '{"city": "Paris"}'


async def test_a_plain_call_still_returns_the_call_whole(sim):
    from router.core import Router

    sim.script("sim-light", [WEATHER_CALL])
    async with Router.from_config(adapter_config(sim)) as router:
        result = await router.acomplete("Weather in Paris?", tools=TOOLS)
    assert result.completion.tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
