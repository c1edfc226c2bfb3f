"""The router as an OpenAI Agents SDK model, against the real `agents` package: streaming in
pieces, tool calls as they form, cancellation reaching the upstream, the decision in metadata."""

from __future__ import annotations

import pytest

from tests.helpers import require_package

require_package("agents", "agents")

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402

from router.core import Router  # noqa: E402
from router.integrations.openai_agents import RoutedModelResponse, RouterModel, RouterProvider  # noqa: E402
from tests.helpers import WEATHER_CALL, adapter_config, sim_count, use_arbiter  # noqa: E402

pytestmark = pytest.mark.integration

set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


def _router(sim) -> Router:
    sim.update_profile("sim-light", ttft_s=0.02, tokens_per_s=200, answer_tokens=12)
    return Router.from_config(adapter_config(sim))


async def test_text_and_tool_calls_stream_in_pieces_and_the_decision_rides_in_metadata(sim):
    sim.script("sim-light", [WEATHER_CALL, "It is sunny in Paris today, as it often is."])
    router = _router(sim)
    agent = Agent(name="a", tools=[get_weather], model=RouterModel(router, deadline_s=20))
    run = Runner.run_streamed(agent, "Weather in Paris?")
    kinds: list[str] = []
    completed = []
    async for event in run.stream_events():
        if event.type == "raw_response_event":
            kinds.append(event.data.type)
            if event.data.type == "response.completed":
                completed.append(event.data.response.metadata)
    await router.aclose()
    assert kinds.count("response.function_call_arguments.delta") > 1  # the call's arguments as they formed
    assert kinds.count("response.output_text.delta") > 1  # the answer token by token
    assert run.final_output == "It is sunny in Paris today, as it often is."
    assert len(completed) == 2 and all(m["route_backend"] == "light" and m["route_tier"] == "light" for m in completed)
    assert {"route_score", "route_cost_usd", "route_chosen"} <= set(completed[0])
    assert sim.stats("sim-light")["requests"] == 2


async def test_a_plain_run_carries_the_decision_on_each_raw_response(sim):
    sim.script("sim-light", [WEATHER_CALL, "Sunny."])
    router = _router(sim)
    result = await Runner.run(Agent(name="a", tools=[get_weather], model=RouterModel(router)), "Weather in Paris?")
    await router.aclose()
    assert result.final_output == "Sunny."
    assert all(isinstance(r, RoutedModelResponse) for r in result.raw_responses)
    first = result.raw_responses[0].route
    assert first["backend"] == "light" and first["tier"] == "light" and first["cost_usd"] > 0
    assert first["score"] is not None and first["downgrade"] is None


async def test_cancelling_a_streamed_run_closes_the_upstream_call(sim):
    sim.update_profile("sim-heavy", ttft_s=0.01, tokens_per_s=20, answer_tokens=400)  # ~20 s if left running
    router = Router.from_config(adapter_config(sim))
    run = Runner.run_streamed(Agent(name="a", model=RouterModel(router, "heavy")), "Tell me a long story.")
    async for event in run.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            run.cancel()
    stats = await sim_count(sim, "sim-heavy", "cancelled", 1)
    await router.aclose()
    assert stats["cancelled"] == 1 and stats["completed"] == 0


async def test_the_provider_takes_backend_and_consortium_names(sim):
    use_arbiter(sim, "sim-judge")
    router = _router(sim)
    config = RunConfig(model_provider=RouterProvider(router, deadline_s=20))
    panel = await Runner.run(Agent(name="a", model="panel"), "hi", run_config=config)
    heavy = await Runner.run(Agent(name="a", model="heavy"), "hi", run_config=config)
    await router.aclose()
    assert panel.raw_responses[0].route["backend"] == "panel" and "trace_id" in panel.raw_responses[0].route
    assert heavy.raw_responses[0].route["backend"] == "heavy" and heavy.raw_responses[0].route["forced"]


def test_a_misspelt_option_fails_when_the_model_is_built(sim):
    with pytest.raises(TypeError, match="did you mean 'deadline_s'"):
        RouterModel(Router.from_config(adapter_config(sim)), deadline=3)  # type: ignore[call-arg]
