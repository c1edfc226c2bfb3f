"""Mirascope v2: an @llm.call on openai/gpt-4.1 (its default API for that model) with one @llm.tool,
the documented tool loop (execute_tools, resume), then resume() with a second task."""
import sys

from common import KEY, QUESTION, SECOND
from common import get_weather as _weather
from mirascope import llm

base, scenario = sys.argv[1], sys.argv[2]
llm.register_provider("openai", scope="openai/", api_key=KEY, base_url=f"{base}/v1")


@llm.tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return _weather(city)


@llm.call("openai/gpt-4.1", tools=[get_weather])
def assistant(question: str) -> str:
    return question


def loop(response):
    while response.tool_calls:
        response = response.resume(response.execute_tools())
    return response


first = loop(assistant(QUESTION))
print(first.text())
print(loop(first.resume(SECOND)).text())
