"""Semantic Kernel: ChatCompletionAgent on OpenAIChatCompletion (its AsyncOpenAI client pointed at the
recorder) with one plugin function; a second task on the same ChatHistoryAgentThread."""
import asyncio
import sys
from typing import Annotated

from common import KEY, QUESTION, SECOND
from common import get_weather as _weather
from openai import AsyncOpenAI
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import kernel_function

base, scenario = sys.argv[1], sys.argv[2]


class WeatherPlugin:
    @kernel_function(description="Get the current weather in a city.")
    def get_weather(self, city: Annotated[str, "The city name"]) -> str:
        return _weather(city)


async def main() -> None:
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    service = OpenAIChatCompletion(ai_model_id="gpt-4.1", api_key=KEY, async_client=client)
    agent = ChatCompletionAgent(service=service, name="Assistant", plugins=[WeatherPlugin()])
    first = await agent.get_response(messages=QUESTION)
    print(first.content)
    second = await agent.get_response(messages=SECOND, thread=first.thread)
    print(second.content)

asyncio.run(main())
