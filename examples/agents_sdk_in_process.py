"""The OpenAI Agents SDK with the router as its model, in process: no server to start.

    pip install ".[agents]"
    python examples/agents_sdk_in_process.py

Runs anywhere: it starts the SIMULATED model server (every answer is fake and says so) and
scripts what the simulated models reply, so the agent makes a tool round trip and then returns a
structured output. With real models, drop the simulator and use `Router.from_config()`.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agents import Agent, Runner, function_tool, set_tracing_disabled
from pydantic import BaseModel

from backends.simulator import SimServer
from router import Router
from router.integrations.openai_agents import RouterModel

set_tracing_disabled(True)  # traces would go to OpenAI's servers


class Forecast(BaseModel):
    city: str
    celsius: int


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"22 C and sunny in {city}"


def config(base_url: str) -> dict:
    sim = {"kind": "openai", "base_url": base_url}
    return {
        "backends": {"light": {**sim, "model": "sim-light", "price": {"input": 0.1, "output": 0.4}},
                     "heavy": {**sim, "model": "sim-heavy", "price": {"input": 3, "output": 15}}},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 400},
                    "tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                              {"name": "heavy", "backends": ["heavy"]}]},
        "log": {"enabled": False},
    }


def show(decision: dict) -> None:
    print(f"  route: {decision['route_backend']} (tier {decision.get('route_tier', '-')}, "
          f"score {decision.get('route_score', '-')}, ${float(decision['route_cost_usd']):.6f}, "
          f"downgrade {decision.get('route_downgrade', 'none')})")


async def main() -> None:
    with SimServer() as sim:
        sim.script("sim-light", [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "It is 22 C and sunny in Paris.",
            '{"city": "Paris", "celsius": 22}',
        ])
        router = Router.from_config(config(sim.base_url))
        model = RouterModel(router, "auto", deadline_s=30)

        # 1. A tool round trip, streamed: text arrives token by token, the call as it forms.
        agent = Agent(name="assistant", instructions="Answer briefly; use tools.", tools=[get_weather], model=model)
        run = Runner.run_streamed(agent, "What is the weather in Paris?")
        print("streamed: ", end="")
        async for event in run.stream_events():
            if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
                print(event.data.delta, end="", flush=True)
            elif event.type == "raw_response_event" and event.data.type == "response.function_call_arguments.delta":
                print(f"[tool args: {event.data.delta}]", end="", flush=True)
            elif event.type == "raw_response_event" and event.data.type == "response.completed":
                print()
                show(event.data.response.metadata or {})
        print(f"answer: {run.final_output}")

        # 2. A structured output, not streamed: each model call's decision is on its raw response.
        typed = Agent(name="forecaster", instructions="Reply with the forecast.", output_type=Forecast, model=model)
        result = await Runner.run(typed, "Forecast for Paris?")
        for response in result.raw_responses:
            show({f"route_{k}": v for k, v in response.route.items() if v is not None})
        forecast = result.final_output
        assert isinstance(forecast, Forecast)
        print(f"structured: {forecast!r}")
        assert sim.stats("sim-light")["requests"] == 3
        await router.aclose()


if __name__ == "__main__":
    asyncio.run(main())
