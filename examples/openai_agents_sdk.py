"""The OpenAI Agents SDK on `route serve`, over the Responses API, with a function tool.

    pip install openai-agents
    route serve                      # in another terminal (127.0.0.1:4000; `route sim` for a simulated backend)
    python examples/openai_agents_sdk.py

The router is stateless: the SDK sends the whole conversation each turn, as it does by default
(no `previous_response_id`), and tracing is off because traces would go to OpenAI's servers.
"""

from __future__ import annotations

import os

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)
client = AsyncOpenAI(base_url=os.environ.get("ROUTE_URL", "http://127.0.0.1:4000/v1"),
                     api_key=os.environ.get("ROUTE_API_KEY", "not-needed-on-loopback"))


@function_tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"22 C and sunny in {city}"


agent = Agent(name="assistant", instructions="Answer briefly; use tools when they help.", tools=[get_weather],
              model=OpenAIResponsesModel(model=os.environ.get("ROUTE_MODEL", "auto"), openai_client=client))
result = Runner.run_sync(agent, "What is the weather in Paris?")
print(result.final_output)
