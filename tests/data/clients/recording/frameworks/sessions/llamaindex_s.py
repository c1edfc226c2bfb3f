"""LlamaIndex sessions: workflow ReActAgent and FunctionAgent on OpenAILike, two tasks in one Context."""
import asyncio
import sys

from common import KEY, QUESTION, SECOND, get_weather
from llama_index.core.agent.workflow import FunctionAgent, ReActAgent
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.workflow import Context
from llama_index.llms.openai_like import OpenAILike

base, scenario = sys.argv[1], sys.argv[2]
llm = OpenAILike(model="gpt-4.1", api_base=f"{base}/v1", api_key=KEY, is_chat_model=True,
                 is_function_calling_model=True, max_retries=0)


async def main() -> None:
    cls = {"llamaindex-react": ReActAgent, "llamaindex-function": FunctionAgent}[scenario]
    agent = cls(tools=[get_weather], llm=llm)
    ctx = Context(agent)
    # the Context alone does not carry the memory from one run to the next here (its store skips
    # serializing it), so pass the agent's default memory class explicitly to both runs
    memory = ChatMemoryBuffer.from_defaults(llm=llm)
    print(await agent.run(QUESTION, ctx=ctx, memory=memory))
    print(await agent.run(SECOND, ctx=ctx, memory=memory))

asyncio.run(main())
