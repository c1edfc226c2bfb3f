"""Does shadow judging slow the client down? p50/p95 client latency with it off and on.

    python benchmarks/shadow_latency.py [--requests 400] [--block 50]

One Router per setting, all against the same loopback simulated server, whose models answer
from routing labels (backends/simulator/labelled.py) with a few milliseconds of latency; the
client sends one request at a time through `Router.acomplete` and times each. Settings:
learning off; shadow judging at rate 0.2 and at 1.0, both with auto-learning on (refits every
50 labels, in a child process); and learning off again, whose difference from the first "off"
is the noise of this machine. Blocks of requests take turns between the settings, so drift
(another process waking up) lands on all of them alike. Every answer is SIMULATED.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backends.simulator import SimProfile, SimServer
from backends.simulator.labelled import labelled_profiles, quality_of
from router.config_loader import load_config
from router.consortium.simulated import arbiter_responder
from router.core import Router

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "learning_sample.jsonl"
SETTINGS = {"off": None, "shadow 0.2": 0.2, "shadow 1.0": 1.0, "off again": None}


def _config(base_url: str, data: Path, rate: float | None) -> dict[str, Any]:
    def backend(model: str, **extra: Any) -> dict[str, Any]:
        return {"kind": "openai", "model": model, "base_url": base_url, "max_retries": 0, "timeout_s": 30,
                "price": {"input": 1.0, "output": 2.0}, **extra}

    routing: dict[str, Any] = {"tiers": [{"name": "light", "below": "calibrated", "backends": ["light"]},
                                         {"name": "heavy", "backends": ["heavy"]}]}
    if rate is not None:
        routing["learn"] = {"shadow_rate": rate, "judge": "judge", "auto": True, "refit_every": 50,
                            "budget_usd_per_day": 100.0, "max_in_flight": 8}
    return {"backends": {"light": backend("m-light"), "heavy": backend("m-heavy"),
                         "judge": backend("m-judge", decoding="diffusion")},
            "routing": routing, "log": {"enabled": False, "path": str(data / "route.db")}}  # fmt: skip


def _profiles(records: list[dict[str, Any]]) -> dict[str, SimProfile]:
    light = SimProfile(ttft_s=0.01, tokens_per_s=4000.0)  # ~20 ms for a 40-token answer
    profiles = labelled_profiles(records, light="m-light", heavy="m-heavy", base=light)
    profiles["m-heavy"] = SimProfile(ttft_s=0.03, tokens_per_s=2000.0, responder=profiles["m-heavy"].responder)
    profiles["m-judge"] = SimProfile(ttft_s=0.005, responder=arbiter_responder(
        score=lambda text: quality_of(text) or -1.0, ties=True))
    return profiles


async def _block(router: Router, prompts: list[str], start: int, size: int, into: list[float]) -> None:
    for i in range(start, start + size):
        began = time.perf_counter()
        await router.acomplete(prompts[i % len(prompts)], max_tokens=40)
        into.append(time.perf_counter() - began)


async def run(requests: int, block: int) -> dict[str, Any]:
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    prompts = [r["prompt"] for r in records]
    with SimServer(_profiles(records)) as sim, tempfile.TemporaryDirectory() as tmp:
        routers = {name: _router(sim.base_url, Path(tmp), name, rate) for name, rate in SETTINGS.items()}
        times: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for start in range(0, requests, block):
            for name, router in routers.items():
                await _block(router, prompts, start, min(block, requests - start), times[name])
        return {name: await _summary(router, times[name]) for name, router in routers.items()}


def _router(base_url: str, tmp: Path, name: str, rate: float | None) -> Router:
    data = tmp / name.replace(" ", "-")
    data.mkdir()
    router = Router(load_config(_config(base_url, data, rate)), source="api")
    if router.learner is not None:
        router.learner.random.seed(0)
    return router


async def _summary(router: Router, times: list[float]) -> dict[str, Any]:
    """p50/p95 of one setting, and what its learner did meanwhile (finished first)."""
    learner = router.learner
    if learner is not None:
        await learner.drain()
    ms = sorted(t * 1000 for t in times)
    found = {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
             "requests": len(ms), "judged": 0, "refits": 0, "version": 0}  # fmt: skip
    if learner is not None:
        found.update(judged=learner.counts.shadow["judged"], refits=sum(learner.counts.refits.values()),
                     version=learner.version)
    await router.aclose()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per setting")
    parser.add_argument("--block", type=int, default=50, help="requests per turn")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = asyncio.run(run(args.requests, args.block))
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    off = found["off"]
    noise = abs(found["off again"]["p50_ms"] - off["p50_ms"]) / off["p50_ms"]
    print(f"client latency, {args.requests} requests per setting, one at a time (SIMULATED models, loopback)")
    print(f"{'setting':12s} {'p50 ms':>8s} {'p95 ms':>8s} {'p50/off':>8s} {'judged':>7s} {'refits':>7s} {'version':>8s}")
    for name, row in found.items():
        print(f"{name:12s} {row['p50_ms']:8.2f} {row['p95_ms']:8.2f} {row['p50_ms'] / off['p50_ms']:8.3f} "
              f"{row['judged']:7d} {row['refits']:7d} {row['version']:8d}")
    worst = max(abs(found[n]["p50_ms"] / off["p50_ms"] - 1) for n in ("shadow 0.2", "shadow 1.0"))
    print(f"noise (off vs off again): {noise:.1%} of p50; shadow judging moved p50 by at most {worst:.1%}: "
          f"{'within' if worst <= max(noise, 0.02) else 'BEYOND'} noise (or 2 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
