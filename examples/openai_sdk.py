"""Use `route serve` from the openai Python SDK, plain and streamed.

    route serve                      # in another terminal (127.0.0.1:4000; `route sim` for a simulated backend)
    python examples/openai_sdk.py

`model="auto"` lets the router pick per request; any backend or consortium name from
`GET /v1/models` forces one. The response headers say what the router decided.
"""

from __future__ import annotations

import os

from openai import OpenAI

# Without --api-key-env the server needs no key, but the SDK insists on one: any string will do.
client = OpenAI(base_url=os.environ.get("ROUTE_URL", "http://127.0.0.1:4000/v1"),
                api_key=os.environ.get("ROUTE_API_KEY", "not-needed-on-loopback"))

print("models:", [m.id for m in client.models.list()])

raw = client.chat.completions.with_raw_response.create(
    model="auto", messages=[{"role": "user", "content": "Name three prime numbers."}])
answer = raw.parse()
print(f"→ {raw.headers.get('x-route-backend')} (tier {raw.headers.get('x-route-tier')}, "
      f"score {raw.headers.get('x-route-score')})")
print(answer.choices[0].message.content)

stream = client.chat.completions.create(
    model="auto", stream=True, stream_options={"include_usage": True},
    messages=[{"role": "user", "content": "Write a haiku about latency."}])
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
    elif chunk.usage:
        print(f"\n[{chunk.usage.completion_tokens} tokens]")
