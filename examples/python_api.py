"""The Python API inside agent code: routed calls, streams, a forced backend and a consortium.

    python examples/python_api.py

Runs anywhere: it starts the SIMULATED model server in-process (every answer is fake and
says so) and points a config at it. With real models, drop the simulator and use
`Router.from_config()` (the config search order) or `Router.from_config("config.yaml")`.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backends.simulator import DEFAULT_PROFILES, SimProfile, SimServer
from backends.types import TextChunk
from router import Router
from router.consortium.simulated import judge_when_asked


def config(base_url: str) -> dict:
    local = {"kind": "openai", "base_url": base_url}
    return {
        "backends": {
            "diffusiongemma": {**local, "model": "google/diffusiongemma-26B-A4B-it", "decoding": "diffusion"},
            "mercury-2": {**local, "model": "mercury-2", "decoding": "diffusion", "price": {"input": 0.25, "output": 0.75}},
            "frontier": {**local, "model": "claude-sonnet-4-5", "price": {"input": 3, "output": 15}},
        },
        "routing": {
            "scorer": {"kind": "learned"},
            "tiers": [
                {"name": "local", "below": 0.45, "backends": ["diffusiongemma"]},
                {"name": "fast-hosted", "below": "calibrated", "backends": ["mercury-2"]},
                {"name": "frontier", "backends": ["frontier"]},
            ],
        },
        "consortia": {"panel": {"members": ["diffusiongemma*3"], "arbiter": "mercury-2", "judging": "rank"}},
        "log": {"enabled": False},
    }


async def agent_step(router: Router) -> None:
    # Routed: the scorer and latency model pick the backend; the decision comes back with the answer.
    for prompt in ("hi there", "Prove that the square root of 2 is irrational, then generalise to any non-square n."):
        result = await router.acomplete(prompt, max_tokens=64, deadline_s=10)
        print(f"{result.decision.chosen:<15} score {result.decision.score.value:.2f}  {result.text[:60]}...")

    # Streamed: the decision is known before the first token.
    stream = router.astream("Write a haiku about latency", max_tokens=32)
    print("streaming from", stream.decision.chosen, end=": ")
    async for chunk in stream:
        if isinstance(chunk, TextChunk):
            print(chunk.text, end="", flush=True)
    print(f"\n  ({stream.result.completion.usage.output_tokens} tokens, ${stream.result.completion.cost_usd:.6f})")

    # A consortium is used like any backend; its full trace rides along.
    result = await router.acomplete("Name a good first programming language.", model="panel")
    trace = result.completion.metadata["trace"]
    print(f"panel: {trace['calls']} model calls, winner: {result.text[:50]}...")


def main() -> None:
    profiles = {name: SimProfile(ttft_s=0.01, decoding=p.decoding, canvas_s=0.02 if p.decoding == "diffusion" else 0,
                                 answer_tokens=p.answer_tokens)
                for name, p in DEFAULT_PROFILES.items()}
    profiles["mercury-2"] = SimProfile(ttft_s=0.01, decoding="diffusion", canvas_s=0.02,
                                       responder=judge_when_asked(confidence=0.9))
    with SimServer(profiles=profiles) as sim:
        router = Router.from_config(config(sim.base_url))
        asyncio.run(agent_step(router))


if __name__ == "__main__":
    main()
