"""Latency-aware routing against LiteLLM Router's latency-based routing, side by side.

    .venv/bin/python benchmarks/latency_routing.py            # ~1-2 minutes on 2 cores
    .venv/bin/python benchmarks/latency_routing.py --requests 1000 --scale 0.5

One simulated OpenAI-compatible server on loopback (backends/simulator) serves five models:
a fast local diffusion model, a fast hosted diffusion model, a slow expensive frontier model, a
mid-priced model that degrades halfway through the run (runtime profile update), and one that
fails intermittently (a quarter of its requests: half HTTP 500, half a hung connection). The
same mixed workload (short and long prompts, several max_tokens and deadlines, open-loop
arrivals) is run through

  * our Router (tiers from the prompt-length scorer, the live latency model, deadlines,
    breakers, hedging), and
  * litellm.Router(routing_strategy="latency-based-routing") with one model group per tier
    holding the same deployments (`openai/<model>` + api_base at the simulator), the request's
    deadline as its timeout, fallbacks between the groups, and the same number of retries.

Each request goes to the tier our scorer picks, for both routers, so quality constraints match.
Neither router has seen a request before the run; ours starts from the config's latency priors.
Reported per router: share of requests answered within their deadline, p50/p95/p99 end-to-end
latency (failed requests count at the time they failed), total simulated cost (a hedged call
that lost the race is charged its input and the output generated before it was cancelled), and
failed requests. Our deadline is a hard limit (a request not answered in time fails); litellm's
timeout is per attempt, so its retries can answer late: a deadline miss, not a failure.
All simulator timings are multiplied by --scale (default 0.25) to fit a few minutes; ratios
between backends, and between timings and deadlines, are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.base import BackendSettings
from backends.openai_http import OpenAIBackend
from backends.simulator import SimProfile, SimServer
from backends.types import Price, Usage
from policies.tiers import pick_tier
from router.config_loader import load_config
from router.core import Router

# name: (simulated model, decoding, price $/Mtok in/out, config prior, unscaled sim profile)
BACKENDS = {
    "dgemma-local": ("google/diffusiongemma-26B-A4B-it", "diffusion", (0.0, 0.0),
                     {"ttft_ms": 30, "canvas_ms": 250},
                     dict(ttft_s=0.03, decoding="diffusion", canvas_s=0.25, answer_tokens=300)),
    "mercury-2": ("mercury-2", "diffusion", (0.25, 0.75), {"ttft_ms": 150, "canvas_ms": 120},
                  dict(ttft_s=0.15, decoding="diffusion", canvas_s=0.12, answer_tokens=300)),
    "frontier": ("claude-sonnet-4-5", "autoregressive", (3.0, 15.0), {"ttft_ms": 800, "tokens_per_s": 60},
                 dict(ttft_s=0.8, tokens_per_s=60.0, answer_tokens=160)),
    "degrader": ("glm-5.2", "autoregressive", (0.6, 2.2), {"ttft_ms": 600, "tokens_per_s": 90},
                 dict(ttft_s=0.6, tokens_per_s=90.0, answer_tokens=140)),
    "flaky": ("k2.6", "autoregressive", (0.6, 2.5), {"ttft_ms": 500, "tokens_per_s": 100},
              dict(ttft_s=0.5, tokens_per_s=100.0, answer_tokens=140)),
}
# The intermittent failures of "flaky": a quarter of its requests, half HTTP 500 and half a hung
# connection (accepted, never answered), in one seeded order replayed identically for both routers.
FLAKY_FAULT_RATE = 0.25
FLAKY_FAULTS = ("500", "hang")
DEGRADED = dict(ttft_s=2.5, tokens_per_s=25.0)  # what "degrader" becomes halfway through (unscaled)
TIERS = [("light", 0.5, ["dgemma-local", "mercury-2"]), ("heavy", None, ["degrader", "flaky", "frontier"])]
RETRIES = 2  # per deployment call, both routers
LIGHT_DEADLINES_S = (0.8, 1.5, 3.0)  # unscaled; every one is reachable by a healthy light backend
HEAVY_DEADLINES_S = (3.0, 5.0, 10.0)


@dataclass
class Job:
    index: int
    prompt: str
    tier: str
    max_tokens: int | None
    deadline_s: float
    at_s: float  # arrival, seconds after the start


@dataclass
class Outcome:
    elapsed_s: float
    ok: bool
    cost_usd: float = 0.0
    backend: str = ""


@dataclass
class Run:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    wall_s: float = 0.0


def _prompt(rng: random.Random, chars: int) -> str:
    words = "route the request to a backend that meets its deadline at the lowest cost".split()
    text = ""
    while len(text) < chars:
        text += rng.choice(words) + " "
    return text[:chars]


def workload(n: int, rate: float, scale: float, seed: int, scorer, tiers) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    at = 0.0
    for i in range(n):
        heavy = rng.random() < 0.45
        chars = rng.randint(700, 3000) if heavy else rng.randint(40, 500)
        prompt = _prompt(rng, chars)
        tier = tiers[pick_tier(scorer.score([{"role": "user", "content": prompt}]).value, tiers)].name
        max_tokens = rng.choice((None, 128, 256)) if heavy else rng.choice((None, 64, 200, 400))
        deadline = rng.choice(HEAVY_DEADLINES_S if heavy else LIGHT_DEADLINES_S) * scale
        at += rng.expovariate(rate)
        jobs.append(Job(i, prompt, tier, max_tokens, deadline, at))
    return jobs


def sim_profiles(scale: float) -> dict[str, SimProfile]:
    out = {}
    for _, (model, _, _, _, profile) in BACKENDS.items():
        scaled = {k: (v * scale if k in ("ttft_s", "canvas_s") else v / scale if k == "tokens_per_s" else v)
                  for k, v in profile.items()}
        out[model] = SimProfile(**scaled)
    return out


def _cancelled_cost(name: str, job: Job, elapsed_s: float, scale: float, degraded: bool) -> float:
    """What a provider bills for a call cancelled after `elapsed_s` (a lost hedge): the input, and
    the output tokens the simulator had generated by then (from the profile in force)."""
    _, _, (pin, pout), _, profile = BACKENDS[name]
    if degraded and name == "degrader":
        profile = {**profile, **DEGRADED}
    answer = profile["answer_tokens"] if job.max_tokens is None else min(job.max_tokens, profile["answer_tokens"])
    decode_s = elapsed_s / scale - profile["ttft_s"]  # unscaled seconds spent generating
    if decode_s <= 0:
        out = 0
    elif profile.get("decoding") == "diffusion":
        out = int(decode_s // profile["canvas_s"]) * 256
    else:
        out = int(decode_s * profile["tokens_per_s"]) + 1
    return Price(pin, pout).cost(Usage(len(job.prompt.split()), min(out, answer)))


# -- our router -----------------------------------------------------------------------------

def our_config(sim: SimServer, scale: float) -> dict:
    backends = {}
    for name, (model, decoding, (pin, pout), prior, _) in BACKENDS.items():
        scaled_prior = {k: (v * scale if k.endswith("_ms") else v / scale) for k, v in prior.items()}
        backends[name] = {"kind": "openai", "model": model, "base_url": sim.base_url, "decoding": decoding,
                          "price": {"input": pin, "output": pout}, "latency": scaled_prior,
                          "max_retries": RETRIES, "timeout_s": 60}
    return {
        "backends": backends,
        "routing": {
            "scorer": {"kind": "length", "threshold_chars": 600},
            "tiers": [{"name": n, "below": b, "backends": bs} if b else {"name": n, "backends": bs}
                      for n, b, bs in TIERS],
            "prefer": "cheap",
            "hedge": True,
            "breaker": {"failures": 3, "cooldown_ms": 30_000 * scale},
            "latency": {"stale_after_ms": 20_000 * scale},
        },
    }


def our_router(sim: SimServer, scale: float) -> Router:
    loaded = load_config(our_config(sim, scale))
    built = {}
    for name, spec in loaded.config.backends.items():
        settings = spec.settings(name)
        # Retry backoff scaled like every other timing (BackendSettings' default is 0.25 s).
        built[name] = OpenAIBackend(BackendSettings(**{**_fields(settings), "backoff_initial_s": 0.25 * scale}))
    return Router(loaded, backends=built, source="api")


def _fields(settings: BackendSettings) -> dict:
    return {f: getattr(settings, f) for f in settings.__dataclass_fields__}


async def run_ours(sim: SimServer, jobs: list[Job], scale: float, degrade_at: int) -> Run:
    router = our_router(sim, scale)
    run = Run("route (ours)", jobs=jobs)
    losers: dict[int, list[tuple[str, float]]] = {}

    def on_attempt(attempt, decision) -> None:
        if attempt.cancelled:
            losers.setdefault(id(decision), []).append((attempt.backend, attempt.elapsed_s))

    router.add_observer(on_attempt)

    async def one(job: Job) -> Outcome:
        start = time.perf_counter()
        try:
            result = await router.acomplete(job.prompt, max_tokens=job.max_tokens, deadline_s=job.deadline_s)
        except Exception:
            return Outcome(time.perf_counter() - start, False)
        elapsed = time.perf_counter() - start
        degraded = job.index >= degrade_at
        extra = sum(_cancelled_cost(n, job, t, scale, degraded) for n, t in losers.pop(id(result.decision), []))
        return Outcome(elapsed, True, result.completion.cost_usd + extra, result.backend)

    run.outcomes = await _drive(jobs, one, sim, degrade_at, scale)
    run.wall_s = max(o.elapsed_s + j.at_s for o, j in zip(run.outcomes, jobs))
    await router.aclose()
    return run


# -- LiteLLM Router -------------------------------------------------------------------------

def litellm_router(sim: SimServer):
    from backends.litellm_backend import load_litellm

    litellm = load_litellm()
    model_list = []
    for tier, _, names in TIERS:
        for name in names:
            model = BACKENDS[name][0]
            model_list.append({"model_name": tier, "model_info": {"id": f"{tier}/{name}"},
                               "litellm_params": {"model": f"openai/{model}", "api_base": sim.base_url,
                                                  "api_key": "simulated"}})
    return litellm.Router(model_list=model_list, routing_strategy="latency-based-routing",
                          num_retries=RETRIES, fallbacks=[{"light": ["heavy"]}, {"heavy": ["light"]}])


async def run_litellm(sim: SimServer, jobs: list[Job], scale: float, degrade_at: int) -> Run:
    router = litellm_router(sim)
    run = Run("litellm.Router latency-based", jobs=jobs)
    by_model = {spec[0]: name for name, spec in BACKENDS.items()}

    async def one(job: Job) -> Outcome:
        start = time.perf_counter()
        kwargs = {"max_tokens": job.max_tokens} if job.max_tokens else {}
        try:
            response = await router.acompletion(model=job.tier, messages=[{"role": "user", "content": job.prompt}],
                                                timeout=job.deadline_s, **kwargs)
        except Exception:
            return Outcome(time.perf_counter() - start, False)
        elapsed = time.perf_counter() - start
        name = by_model.get(response.model.removeprefix("openai/"), "")
        if not name:  # litellm reports the model the server named
            name = next((n for m, n in by_model.items() if response.model.endswith(m)), "")
        pin, pout = BACKENDS[name][2] if name else (0.0, 0.0)
        usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        return Outcome(elapsed, True, Price(pin, pout).cost(usage), name)

    run.outcomes = await _drive(jobs, one, sim, degrade_at, scale)
    run.wall_s = max(o.elapsed_s + j.at_s for o, j in zip(run.outcomes, jobs))
    return run


# -- driving and reporting ------------------------------------------------------------------

async def _drive(jobs: list[Job], one, sim: SimServer, degrade_at: int, scale: float) -> list[Outcome]:
    """Open-loop arrivals; the degrader slows down when request `degrade_at` is issued."""
    await asyncio.to_thread(sim.reset)
    rng = random.Random(1234)
    faults = [rng.choice(FLAKY_FAULTS) if rng.random() < FLAKY_FAULT_RATE else None for _ in range(5 * len(jobs))]
    await asyncio.to_thread(sim.set_faults, BACKENDS["flaky"][0], faults)
    start = time.perf_counter()
    tasks = []
    for job in jobs:
        delay = start + job.at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if job.index == degrade_at:
            degraded = {"ttft_s": DEGRADED["ttft_s"] * scale, "tokens_per_s": DEGRADED["tokens_per_s"] / scale}
            await asyncio.to_thread(sim.update_profile, BACKENDS["degrader"][0], **degraded)
        tasks.append(asyncio.create_task(one(job)))
    return list(await asyncio.gather(*tasks))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarise(run: Run) -> dict:
    lat = [o.elapsed_s for o in run.outcomes]
    hits = sum(1 for o, j in zip(run.outcomes, run.jobs) if o.ok and o.elapsed_s <= j.deadline_s)
    share = {}
    for o in run.outcomes:
        if o.ok:
            share[o.backend] = share.get(o.backend, 0) + 1
    return {
        "deadline_hits": hits / len(run.outcomes),
        "p50_s": _pct(lat, 0.50), "p95_s": _pct(lat, 0.95), "p99_s": _pct(lat, 0.99),
        "mean_s": statistics.fmean(lat),
        "cost_usd": sum(o.cost_usd for o in run.outcomes),
        "failed": sum(1 for o in run.outcomes if not o.ok),
        "wall_s": run.wall_s,
        "share": share,
    }


def report(ours: dict, theirs: dict, args) -> None:
    print(f"\n{args.requests} requests, ~{args.rate:g}/s open loop, seed {args.seed}. SIMULATED backends; "
          f"timings scaled x{args.scale:g}\n(ratios kept, deadlines scaled alike); 'degrader' slows down at request "
          f"{args.requests // 2}; 'flaky' fails {FLAKY_FAULT_RATE:.0%} of its calls (500 or hang).")
    print(f"{'':28}{'route (ours)':>16}{'litellm.Router':>16}{'ratio':>10}")
    rows = [("deadline hits", "deadline_hits", "{:.1%}"), ("p50 latency (s)", "p50_s", "{:.3f}"),
            ("p95 latency (s)", "p95_s", "{:.3f}"), ("p99 latency (s)", "p99_s", "{:.3f}"),
            ("mean latency (s)", "mean_s", "{:.3f}"), ("total simulated cost ($)", "cost_usd", "{:.5f}"),
            ("failed requests", "failed", "{:d}")]
    for label, key, fmt in rows:
        a, b = ours[key], theirs[key]
        ratio = f"{a / b:.2f}x" if b else "-"
        print(f"{label:28}{fmt.format(a):>16}{fmt.format(b):>16}{ratio:>10}")
    for label, result in (("ours", ours), ("litellm", theirs)):
        shares = ", ".join(f"{k} {v}" for k, v in sorted(result["share"].items()))
        print(f"answered by ({label}): {shares}")
    verdict = (ours["deadline_hits"] > theirs["deadline_hits"] and ours["p95_s"] < theirs["p95_s"]
               and ours["cost_usd"] <= theirs["cost_usd"] and ours["failed"] == 0)
    print(f"target (more deadline hits, lower p95, cost no higher, zero failed): {'MET' if verdict else 'NOT MET'}")


async def main(args) -> None:
    profiles = sim_profiles(args.scale)
    async with SimServer(profiles) as sim:
        router = our_router(sim, args.scale)
        jobs = workload(args.requests, args.rate, args.scale, args.seed, router.scorer, router.tiers)
        degrade_at = args.requests // 2
        t0 = time.perf_counter()
        ours = summarise(await run_ours(sim, jobs, args.scale, degrade_at))
        t1 = time.perf_counter()
        theirs = summarise(await run_litellm(sim, jobs, args.scale, degrade_at))
        t2 = time.perf_counter()
        print(f"(ran ours in {t1 - t0:.1f}s, litellm in {t2 - t1:.1f}s)")
        report(ours, theirs, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--rate", type=float, default=12.0, help="requests per second (Poisson arrivals)")
    parser.add_argument("--scale", type=float, default=0.25, help="multiply every simulated timing by this")
    parser.add_argument("--seed", type=int, default=7)
    asyncio.run(main(parser.parse_args()))
