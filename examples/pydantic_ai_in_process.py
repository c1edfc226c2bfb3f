"""pydantic-ai with the router as its model, in process: no server to start.

    pip install ".[pydantic-ai]"
    python examples/pydantic_ai_in_process.py

Runs anywhere: it starts the SIMULATED model server (every answer is fake and says so) and
scripts what the simulated model replies, so the agent makes a tool round trip and then returns
a structured output. With real models, drop the simulator and use `Router.from_config()`.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, PartDeltaEvent, PartStartEvent, TextPartDelta, ToolCallPartDelta

from backends.simulator import SimServer
from router import Router
from router.integrations.pydantic_ai import RouterModel


class Forecast(BaseModel):
    city: str
    celsius: int


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


def show(messages: list) -> None:
    for message in messages:
        if isinstance(message, ModelResponse) and message.provider_details:
            route = message.provider_details["route"]
            downgrade = route.get("downgrade")
            print(f"  route: {route['backend']} (tier {route['tier']}, score {route['score']}, "
                  f"${route['cost_usd']:.6f}, downgrade "
                  f"{downgrade['from_tier'] + '->' + downgrade['to_tier'] if downgrade else 'none'})")


async def main() -> None:
    with SimServer() as sim:
        sim.script("sim-light", [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "It is 22 C and sunny in Paris.",
            {"tool_calls": [{"name": "final_result", "arguments": {"city": "Paris", "celsius": 22}}]},
        ])
        router = Router.from_config(config(sim.base_url))
        model = RouterModel(router, "auto", deadline_s=30)

        # 1. A tool round trip, streamed as events: the call's arguments and the answer as they form.
        agent = Agent(model, instructions="Answer briefly; use tools.")

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """Current weather in a city."""
            return f"22 C and sunny in {city}"

        async with agent.run_stream_events("What is the weather in Paris?") as events:
            async for event in events:
                if isinstance(event, PartStartEvent) and event.part.part_kind == "tool-call":
                    print(f"[tool call: {event.part.tool_name}]", end="", flush=True)
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, ToolCallPartDelta):
                    print(f"[args: {event.delta.args_delta}]", end="", flush=True)
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    print(event.delta.content_delta, end="", flush=True)
                elif isinstance(event, PartStartEvent) and event.part.part_kind == "text":
                    print(event.part.content, end="", flush=True)
                elif event.event_kind == "agent_run_result":
                    print()
                    show(event.result.all_messages())
                    print(f"answer: {event.result.output}")

        # 2. A structured output.
        typed = Agent(model, output_type=Forecast, instructions="Reply with the forecast.")
        result = await typed.run("Forecast for Paris?")
        show(result.all_messages())
        print(f"structured: {result.output!r}")
        assert isinstance(result.output, Forecast)
        assert sim.stats("sim-light")["requests"] == 3
        await router.aclose()


if __name__ == "__main__":
    asyncio.run(main())
