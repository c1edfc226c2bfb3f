"""LangChain with the router as its chat model, in process: no server to start.

    pip install ".[langchain]"
    python examples/langchain_in_process.py

Runs anywhere: it starts the SIMULATED model server (every answer is fake and says so) and
scripts what the simulated model replies, so the agent loop below makes a tool round trip and
then a structured output. `ChatRouter` works wherever LangChain or LangGraph takes a chat model
(e.g. `create_agent(model=ChatRouter(...), tools=[...])`). With real models, drop the simulator
and use `Router.from_config()`.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel

from backends.simulator import SimServer
from router import Router
from router.integrations.langchain import ChatRouter


class Forecast(BaseModel):
    city: str
    celsius: int


@tool
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


def show(message: AIMessage | AIMessageChunk) -> None:
    route = message.response_metadata["route"]
    downgrade = route.get("downgrade")
    print(f"  route: {route['backend']} (tier {route['tier']}, score {route['score']}, ${route['cost_usd']:.6f}, "
          f"downgrade {downgrade['from_tier'] + '->' + downgrade['to_tier'] if downgrade else 'none'})")


async def agent(llm: ChatRouter, question: str) -> str:
    """A small agent loop: stream the model's turn; run the tools it calls; repeat until it answers."""
    tools = {"get_weather": get_weather}
    model = llm.bind_tools(list(tools.values()))
    history: list[BaseMessage] = [HumanMessage(question)]
    while True:
        turn: AIMessageChunk | None = None
        async for chunk in model.astream(history):
            if chunk.content:
                print(chunk.content, end="", flush=True)
            for piece in chunk.tool_call_chunks:
                print(f"[tool call piece: {piece['name'] or ''}{piece['args'] or ''}]", end="", flush=True)
            turn = chunk if turn is None else turn + chunk
        assert turn is not None
        print()
        show(turn)
        history.append(turn)
        if not turn.tool_calls:
            return str(turn.content)
        for call in turn.tool_calls:
            history.append(ToolMessage(tools[call["name"]].invoke(call["args"]), tool_call_id=call["id"]))


async def main() -> None:
    with SimServer() as sim:
        sim.script("sim-light", [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "It is 22 C and sunny in Paris.",
            {"tool_calls": [{"name": "Forecast", "arguments": {"city": "Paris", "celsius": 22}}]},
        ])
        router = Router.from_config(config(sim.base_url))
        llm = ChatRouter(router=router, model="auto", deadline_s=30)
        print(f"answer: {await agent(llm, 'What is the weather in Paris?')}")

        structured = llm.with_structured_output(Forecast, include_raw=True)
        out = await structured.ainvoke("Forecast for Paris?")
        show(out["raw"])
        forecast = out["parsed"]
        assert isinstance(forecast, Forecast)
        print(f"structured: {forecast!r}")
        assert sim.stats("sim-light")["requests"] == 3
        await router.aclose()


if __name__ == "__main__":
    asyncio.run(main())
