"""Agno: Agent with one tool on OpenAIChat (chat completions) or OpenAIResponses, an InMemoryDb and
add_history_to_context=True so a second run in the same session sees the first."""
import sys

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.openai import OpenAIChat, OpenAIResponses
from common import KEY, QUESTION, SECOND, get_weather

base, scenario = sys.argv[1], sys.argv[2]
cls = {"agno-chat": OpenAIChat, "agno-responses": OpenAIResponses}[scenario]
model = cls(id="gpt-4.1", base_url=f"{base}/v1", api_key=KEY, max_retries=0)
agent = Agent(model=model, tools=[get_weather], db=InMemoryDb(), add_history_to_context=True, telemetry=False)
print(agent.run(QUESTION, session_id="s1").content)
print(agent.run(SECOND, session_id="s1").content)
