"""AutoGen AgentChat: AssistantAgent with one tool on OpenAIChatCompletionClient; reflect_on_tool_use=True
(else the agent returns the tool's result without asking the model again); a second run() keeps
the agent's model context."""
import asyncio
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from common import KEY, QUESTION, SECOND, get_weather

base, scenario = sys.argv[1], sys.argv[2]


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4.1", base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    agent = AssistantAgent("assistant", model_client=client, tools=[get_weather], reflect_on_tool_use=True)
    print((await agent.run(task=QUESTION)).messages[-1])
    print((await agent.run(task=SECOND)).messages[-1])
    await client.close()

asyncio.run(main())
