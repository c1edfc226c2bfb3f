"""Use `route serve` from Google's google-genai SDK (Gemini's protocol): a plain answer, a
stream, a function call round trip.

    route serve                      # in another terminal (127.0.0.1:4000; `route sim` for a simulated backend)
    python examples/google_genai_sdk.py

`model="auto"` lets the router pick per request; a backend or consortium name forces one, and a
Gemini model name works too when the config maps it (`aliases: {gemini-*: auto}` ships).
"""

from __future__ import annotations

import os

from google import genai
from google.genai import types

# Without --api-key-env the server needs no key, but the SDK insists on one: any string will do.
# It is sent as `x-goog-api-key`, which route serve reads as it reads a bearer token.
client = genai.Client(api_key=os.environ.get("ROUTE_API_KEY", "not-needed-on-loopback"),
                      http_options=types.HttpOptions(base_url=os.environ.get("ROUTE_URL", "http://127.0.0.1:4000")))
MODEL = os.environ.get("ROUTE_MODEL", "auto")

answer = client.models.generate_content(model=MODEL, contents="Name three prime numbers.",
                                        config=types.GenerateContentConfig(system_instruction="Answer in one sentence."))
reason = answer.candidates[0].finish_reason if answer.candidates else None
print(answer.text, f"[{reason.name if reason else '-'}]")

tokens: int | None = 0
for chunk in client.models.generate_content_stream(model=MODEL, contents="Write a haiku about latency."):
    print(chunk.text or "", end="", flush=True)
    tokens = chunk.usage_metadata.candidates_token_count if chunk.usage_metadata else tokens
print(f"\n[{tokens} tokens]")

# A function call round trip: when the model asks for the function, run it and send the result back.
weather = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="get_weather", description="Current weather in a city",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})])
config = types.GenerateContentConfig(tools=[weather])
turns: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="What is the weather in Paris?")])]
reply = client.models.generate_content(model=MODEL, contents=turns, config=config)
for _ in range(3):  # a model may chain calls; three rounds are plenty here
    calls = reply.function_calls or []
    if not calls:
        break
    print("function call:", [(call.name, call.args) for call in calls])
    turns += [types.Content(role="model", parts=[types.Part(function_call=call) for call in calls]),
              types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
                  id=call.id, name=call.name, response={"result": "22 C, sunny"})) for call in calls])]
    reply = client.models.generate_content(model=MODEL, contents=turns, config=config)
print("answer:", reply.text)
