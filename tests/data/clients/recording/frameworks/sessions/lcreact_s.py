"""LangChain's classic text ReAct agent: create_react_agent + AgentExecutor (langchain < 1.0) with the
stock "hwchase17/react" prompt. The hub is not reachable, so the template is taken from the
create_react_agent docstring in langchain's own source (langchain/agents/react/agent.py), dedented."""
import re
import sys
import textwrap

from common import KEY, QUESTION, get_weather
from langchain.agents import AgentExecutor, create_react_agent
from langchain_core.prompts import PromptTemplate
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

base, scenario = sys.argv[1], sys.argv[2]
doc = create_react_agent.__doc__
raw = re.search(r"template = '''(.*?)'''", doc, re.S).group(1)
first, rest = raw.split("\n", 1)
template = first + "\n" + textwrap.dedent(rest)
prompt = PromptTemplate.from_template(template)

llm = ChatOpenAI(model="gpt-4.1", base_url=f"{base}/v1", api_key=KEY, max_retries=0)
tools = [tool(get_weather)]
agent = create_react_agent(llm, tools, prompt)
executor = AgentExecutor(agent=agent, tools=tools, verbose=True)
print(executor.invoke({"input": QUESTION}))
