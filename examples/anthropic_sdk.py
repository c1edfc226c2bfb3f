"""Use `route serve` from the Anthropic Python SDK: a plain answer, a stream, a tool round trip.

    route serve                      # in another terminal (127.0.0.1:4000; `route sim` for a simulated backend)
    python examples/anthropic_sdk.py

`model="auto"` lets the router pick per request; a backend or consortium name forces one, and a
Claude model name works too when the config maps it (`aliases: {claude-*: auto}` ships).
"""

from __future__ import annotations

import os

import anthropic

# Without --api-key-env the server needs no key, but the SDK insists on one: any string will do.
client = anthropic.Anthropic(base_url=os.environ.get("ROUTE_URL", "http://127.0.0.1:4000"),
                             api_key=os.environ.get("ROUTE_API_KEY", "not-needed-on-loopback"))
MODEL = os.environ.get("ROUTE_MODEL", "auto")

message = client.messages.create(model=MODEL, max_tokens=200, system="Answer in one sentence.",
                                 messages=[{"role": "user", "content": "Name three prime numbers."}])
print(message.content[0].text if message.content else "", f"[{message.stop_reason}]")

with client.messages.stream(model=MODEL, max_tokens=200,
                            messages=[{"role": "user", "content": "Write a haiku about latency."}]) as stream:
    for text in stream.text_stream:
        print(text, end="", flush=True)
    print(f"\n[{stream.get_final_message().usage.output_tokens} tokens]")

# A tool round trip: when the model asks for the tool, run it and send the result back.
weather = {"name": "get_weather", "description": "Current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
turns: list = [{"role": "user", "content": "What is the weather in Paris?"}]
reply = client.messages.create(model=MODEL, max_tokens=200, tools=[weather], messages=turns)
for _ in range(3):  # a model may chain calls; three rounds are plenty here
    if reply.stop_reason != "tool_use":
        break
    calls = [block for block in reply.content if block.type == "tool_use"]
    print("tool call:", [(call.name, call.input) for call in calls])
    turns += [{"role": "assistant", "content": [block.model_dump() for block in reply.content]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "22 C, sunny"}
                                           for call in calls]}]
    reply = client.messages.create(model=MODEL, max_tokens=200, tools=[weather], messages=turns)
print("answer:", "".join(block.text for block in reply.content if block.type == "text"))
