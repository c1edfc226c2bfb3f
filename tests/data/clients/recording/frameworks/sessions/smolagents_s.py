"""smolagents: ToolCallingAgent and CodeAgent on OpenAIServerModel with one @tool, then a second run
with reset=False (the same memory)."""
import sys

from common import KEY, QUESTION, SECOND
from common import get_weather as _weather
from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool

base, scenario = sys.argv[1], sys.argv[2]


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name.
    """
    return _weather(city)


model = OpenAIServerModel(model_id="gpt-4.1", api_base=f"{base}/v1", api_key=KEY)
cls = {"smolagents-toolcalling": ToolCallingAgent, "smolagents-code": CodeAgent}[scenario]
agent = cls(tools=[get_weather], model=model, max_steps=4)
print("RESULT 1:", agent.run(QUESTION))
print("RESULT 2:", agent.run(SECOND, reset=False))
