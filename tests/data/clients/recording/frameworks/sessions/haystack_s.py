"""Haystack: haystack.components.agents.Agent on OpenAIChatGenerator with one tool; a second task by
running the agent again on the first run's messages plus a new user message."""
import sys

from common import KEY, QUESTION, SECOND, get_weather
from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import create_tool_from_function
from haystack.utils import Secret

base, scenario = sys.argv[1], sys.argv[2]
generator = OpenAIChatGenerator(model="gpt-4.1", api_base_url=f"{base}/v1", api_key=Secret.from_token(KEY),
                                max_retries=0)
agent = Agent(chat_generator=generator, tools=[create_tool_from_function(get_weather)])
agent.warm_up()
first = agent.run(messages=[ChatMessage.from_user(QUESTION)])
print(first["messages"][-1].text)
second = agent.run(messages=first["messages"] + [ChatMessage.from_user(SECOND)])
print(second["messages"][-1].text)
