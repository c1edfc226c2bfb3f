"""Instructor: instructor.from_openai(OpenAI(...)) with a response_model, default mode (TOOLS)."""
import sys

import instructor
from common import KEY, QUESTION
from openai import OpenAI
from pydantic import BaseModel

base, scenario = sys.argv[1], sys.argv[2]


class WeatherQuery(BaseModel):
    city: str


client = instructor.from_openai(OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0))
print(client.chat.completions.create(model="gpt-4.1", response_model=WeatherQuery,
                                     messages=[{"role": "user", "content": QUESTION}]))
