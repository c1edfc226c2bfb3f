"""Marvin 3: marvin.run(question, tools=[get_weather]) with an Agent on pydantic-ai's OpenAIChatModel,
then a second marvin.run in the same Thread."""
import sys

# marvin 3.2.7 does not import with pydantic-ai 2 (pydantic_ai.usage.Usage is gone): the venv pins pydantic-ai<2
import marvin
from common import KEY, QUESTION, SECOND, get_weather
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

base, scenario = sys.argv[1], sys.argv[2]
model = OpenAIChatModel("gpt-4.1", provider=OpenAIProvider(base_url=f"{base}/v1", api_key=KEY))
agent = marvin.Agent(name="Marvin", model=model)
thread = marvin.Thread()
print(marvin.run(QUESTION, tools=[get_weather], agents=[agent], thread=thread))
print(marvin.run(SECOND, tools=[get_weather], agents=[agent], thread=thread))
