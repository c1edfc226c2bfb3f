"""CrewAI: one Agent with one tool, one Task (the question as its description), one Crew, kickoff()."""
import sys

from common import KEY, QUESTION
from common import get_weather as _weather
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool

base, scenario = sys.argv[1], sys.argv[2]


@tool("get_weather")
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return _weather(city)


llm = LLM(model="openai/gpt-4.1", base_url=f"{base}/v1", api_key=KEY)
agent = Agent(role="Weather assistant", goal="Answer weather questions accurately using the tools",
              backstory="You look up current weather conditions for people.", tools=[get_weather], llm=llm)
task = Task(description=QUESTION, expected_output="A one-sentence answer with the current weather.", agent=agent)
crew = Crew(agents=[agent], tasks=[task])
print(crew.kickoff())
