"""The router as a LangChain chat model, against the real langchain-core: sync and async,
streaming in pieces, tool calls as they form, structured output, cancellation reaching the
upstream, the decision in `response_metadata`."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.helpers import require_package

require_package("langchain_core", "langchain")

from langchain_core.messages import HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from router.core import Router  # noqa: E402
from router.integrations.langchain import ChatRouter  # noqa: E402
from tests.helpers import WEATHER_CALL, adapter_config, sim_count, use_arbiter  # noqa: E402

pytestmark = pytest.mark.integration


class Forecast(BaseModel):
    city: str
    celsius: int


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


def _llm(sim, **options) -> ChatRouter:
    sim.update_profile("sim-light", ttft_s=0.02, tokens_per_s=200, answer_tokens=12)
    return ChatRouter(router=Router.from_config(adapter_config(sim)), deadline_s=20, **options)


async def test_a_tool_round_trip_streams_the_call_as_it_forms_then_the_answer_in_pieces(sim):
    sim.script("sim-light", [WEATHER_CALL, "It is sunny in Paris today, as it often is."])
    llm = _llm(sim)
    bound = llm.bind_tools([get_weather])
    chunks = [c async for c in bound.astream([HumanMessage("Weather in Paris?")])]
    pieces = [c for c in chunks if c.tool_call_chunks]
    assert len(pieces) > 1  # the id and name first, then the arguments in pieces
    call = chunks[0]
    for c in chunks[1:]:
        call = call + c
    assert call.tool_calls == [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w1", "type": "tool_call"}]
    assert call.response_metadata["route"]["backend"] == "light" and call.response_metadata["finish_reason"] == "tool_calls"
    result = get_weather.invoke(call.tool_calls[0]["args"])
    history = [HumanMessage("Weather in Paris?"), call, ToolMessage(result, tool_call_id="call_w1")]
    texts = [c.content async for c in bound.astream(history) if c.content]
    assert len(texts) > 1 and "".join(texts) == "It is sunny in Paris today, as it often is."
    await llm.router.aclose()


async def test_the_decision_is_in_response_metadata(sim):
    llm = _llm(sim)
    message = await llm.ainvoke("hi")
    await llm.router.aclose()
    route = message.response_metadata["route"]
    assert route["backend"] == "light" and route["tier"] == "light" and route["cost_usd"] > 0
    assert route["score"] is not None and route["downgrade"] is None
    assert message.usage_metadata["output_tokens"] > 0


def test_sync_invoke_and_stream(sim):
    llm = _llm(sim)
    assert llm.invoke("hi").content.startswith("[simulated sim-light]")
    pieces = [c.content for c in llm.stream("hi") if c.content]
    llm.router.close()
    assert len(pieces) > 1


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
async def test_structured_output(sim, method):
    reply = ({"tool_calls": [{"name": "Forecast", "arguments": {"city": "Paris", "celsius": 22}}]}
             if method == "function_calling" else '{"city": "Paris", "celsius": 22}')
    sim.script("sim-light", [reply])
    llm = _llm(sim)
    assert await llm.with_structured_output(Forecast, method=method).ainvoke("Forecast?") == Forecast(city="Paris",
                                                                                                       celsius=22)
    await llm.router.aclose()


async def test_cancelling_a_stream_closes_the_upstream_call(sim):
    sim.update_profile("sim-heavy", ttft_s=0.01, tokens_per_s=20, answer_tokens=400)
    llm = ChatRouter(router=Router.from_config(adapter_config(sim)), model="heavy")
    first = asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(llm.astream("Tell me a long story.")) as chunks:
            async for chunk in chunks:
                if chunk.content:
                    first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    stats = await sim_count(sim, "sim-heavy", "cancelled", 1)
    await llm.router.aclose()
    assert stats["cancelled"] == 1 and stats["completed"] == 0


async def test_a_consortium_answers_with_its_trace_in_the_metadata(sim):
    use_arbiter(sim, "sim-judge")
    llm = ChatRouter(router=Router.from_config(adapter_config(sim)), model="panel")
    message = await llm.ainvoke("hi")
    await llm.router.aclose()
    assert message.response_metadata["route"]["backend"] == "panel" and message.response_metadata["route"]["trace_id"]


async def test_an_unknown_call_option_is_refused(sim):
    llm = _llm(sim)
    with pytest.raises(TypeError, match="did you mean 'deadline_s'"):
        await llm.ainvoke("hi", timeout=3)
    await llm.router.aclose()
