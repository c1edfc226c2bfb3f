"""The router as a pydantic-ai model, against the real pydantic-ai: streaming in pieces, tool
calls as they form, structured output, cancellation reaching the upstream, the decision in
`provider_details`."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tests.helpers import require_package

require_package("pydantic_ai", "pydantic-ai")

from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelResponse, PartDeltaEvent, ToolCallPartDelta  # noqa: E402

from router.core import Router  # noqa: E402
from router.integrations.pydantic_ai import RouterModel  # noqa: E402
from tests.helpers import WEATHER_CALL, adapter_config, sim_count, use_arbiter  # noqa: E402

pytestmark = pytest.mark.integration


class Forecast(BaseModel):
    city: str
    celsius: int


def _agent(sim, **options) -> tuple[Agent, Router]:
    sim.update_profile("sim-light", ttft_s=0.02, tokens_per_s=200, answer_tokens=12)
    router = Router.from_config(adapter_config(sim))
    agent = Agent(RouterModel(router, deadline_s=20, **options), instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return f"sunny in {city}"

    return agent, router


async def test_tool_calls_stream_as_they_form_and_the_answer_in_pieces(sim):
    sim.script("sim-light", [WEATHER_CALL, "It is sunny in Paris today, as it often is."])
    agent, router = _agent(sim)
    tool_deltas = 0
    async with agent.run_stream_events("Weather in Paris?") as events:
        async for event in events:
            if isinstance(event, PartDeltaEvent) and isinstance(event.delta, ToolCallPartDelta):
                tool_deltas += 1
    sim.script("sim-light", [WEATHER_CALL, "It is sunny in Paris today, as it often is."])
    async with agent.run_stream("Weather in Paris?") as run:
        texts = [t async for t in run.stream_text(delta=True, debounce_by=None)]
    await router.aclose()
    assert tool_deltas > 1  # the call's arguments in pieces, after its name
    assert len(texts) > 1 and "".join(texts) == "It is sunny in Paris today, as it often is."
    responses = [m for m in run.all_messages() if isinstance(m, ModelResponse)]
    assert [r.provider_details["route"]["backend"] for r in responses] == ["light", "light"]
    assert responses[0].parts[0].tool_name == "get_weather" and responses[0].finish_reason == "tool_call"


async def test_structured_output_and_the_decision_in_provider_details(sim):
    sim.script("sim-light", [{"tool_calls": [{"name": "final_result", "arguments": {"city": "Paris", "celsius": 22}}]}])
    sim.update_profile("sim-light", ttft_s=0.0)
    router = Router.from_config(adapter_config(sim))
    result = await Agent(RouterModel(router), output_type=Forecast).run("Forecast?")
    await router.aclose()
    assert result.output == Forecast(city="Paris", celsius=22)
    route = next(m for m in result.all_messages() if isinstance(m, ModelResponse)).provider_details["route"]
    assert route["backend"] == "light" and route["tier"] == "light" and route["cost_usd"] > 0
    assert route["score"] is not None and route["downgrade"] is None


async def test_cancelling_a_streamed_run_closes_the_upstream_call(sim):
    sim.update_profile("sim-heavy", ttft_s=0.01, tokens_per_s=20, answer_tokens=400)
    router = Router.from_config(adapter_config(sim))
    agent = Agent(RouterModel(router, "heavy"))
    first = asyncio.Event()

    async def consume() -> None:
        async with agent.run_stream("Tell me a long story.") as run:
            async for _ in run.stream_text(delta=True, debounce_by=None):
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    stats = await sim_count(sim, "sim-heavy", "cancelled", 1)
    await router.aclose()
    assert stats["cancelled"] == 1 and stats["completed"] == 0


async def test_a_consortium_is_a_model_name_like_any_other(sim):
    use_arbiter(sim, "sim-judge")
    router = Router.from_config(adapter_config(sim))
    result = await Agent(RouterModel(router, "panel")).run("hi")
    await router.aclose()
    response = next(m for m in result.all_messages() if isinstance(m, ModelResponse))
    assert response.provider_details["route"]["backend"] == "panel" and response.model_name == "panel"


def test_a_misspelt_option_fails_when_the_model_is_built(sim):
    with pytest.raises(TypeError, match="did you mean 'max_cost_usd'"):
        RouterModel(Router.from_config(adapter_config(sim)), budget=1)  # type: ignore[call-arg]
