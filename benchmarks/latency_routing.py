"""Latency routing, ours against LiteLLM Router's latency-based routing, on equal terms.

    .venv/bin/python benchmarks/latency_routing.py                  # ~3 minutes on 2 busy cores
    .venv/bin/python benchmarks/latency_routing.py --runs 5 --requests 600 --scenario-requests 200
    .venv/bin/python benchmarks/latency_routing.py --hog 2 --scenarios   # loaded: two CPU hogs beside both routers

A SIMULATED OpenAI-compatible server (`python -m backends.simulator`, its own process) serves
five models in two tiers: `light` (a free local diffusion model, a cheap hosted diffusion model)
and `heavy` (a mid-priced model that slows down halfway, one that fails a quarter of its calls --
half HTTP 500, half a hung connection -- and an expensive, slow frontier model). One mixed
workload (short and long prompts, several max_tokens and deadlines, open-loop arrivals) goes
through

  * our Router: the prompt-length scorer picks the tier, no `latency:` priors, hedging on
    (`--no-hedge`: off, as shipped), `on_deadline_risk` at its default (best-effort;
    `--mode downgrade` to compare);
  * litellm.Router(routing_strategy="latency-based-routing") set up as its docs describe: one
    model group per tier (the request names the tier our scorer chose, so both know what each
    prompt needs), `routing_strategy_args` {ttl, lowest_latency_buffer}, pre-call checks,
    `num_retries`, cooldowns (`allowed_fails`, `cooldown_time`) equal to our breaker's, and
    fallbacks between the groups.

Both start knowing nothing about latency, are warmed up on a model the run never uses, see the
same prices, retries and deadlines, and are scored alike (benchmarks/latency_harness.py):
deadline hits; quality misses (a heavy prompt answered by a light model); failures; p50/p95/p99
of latency capped at each request's deadline (a late answer counts at the deadline, as ours is
cut there); and what every billable call cost, hedges and timed-out calls included. Each figure
is the median of `--runs` runs, with the range. Then three drift scenarios, one tier of three
backends: the fast one slows down past the deadline, fails for a while and recovers, or is
added cold halfway; and how many requests each router needs to react.

All simulator timings are multiplied by --scale (default 0.25) to fit the time; ratios between
backends, and between timings and deadlines, are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.latency_harness import (
    Bill,
    Job,
    Ours,
    Run,
    Setup,
    Spec,
    Theirs,
    arrivals,
    drive,
    score,
    simulator,
)
from policies.scoring import build_scorer

SPECS = {
    "dgemma-local": Spec("google/diffusiongemma-26B-A4B-it", "light", (0.0, 0.0),
                         dict(ttft_s=0.03, decoding="diffusion", canvas_s=0.25, answer_tokens=300)),
    "mercury-2": Spec("mercury-2", "light", (0.25, 0.75),
                      dict(ttft_s=0.15, decoding="diffusion", canvas_s=0.12, answer_tokens=300)),
    "degrader": Spec("glm-5.2", "heavy", (0.6, 2.2), dict(ttft_s=0.6, tokens_per_s=90.0, answer_tokens=140)),
    "flaky": Spec("k2.6", "heavy", (0.6, 2.5), dict(ttft_s=0.5, tokens_per_s=100.0, answer_tokens=140)),
    "frontier": Spec("claude-sonnet-4-5", "heavy", (3.0, 15.0), dict(ttft_s=0.8, tokens_per_s=60.0, answer_tokens=160)),
}
TIERS = [("light", 0.5, ["dgemma-local", "mercury-2"]), ("heavy", None, ["degrader", "flaky", "frontier"])]
DEGRADED = dict(ttft_s=2.5, tokens_per_s=25.0)  # what "degrader" becomes halfway (unscaled)
FLAKY_FAULT_RATE, FLAKY_FAULTS = 0.25, ("500", "hang")
LIGHT_DEADLINES_S = (0.8, 1.5, 3.0)  # unscaled; each reachable by a healthy light backend
HEAVY_DEADLINES_S = (3.0, 5.0, 10.0)

# The drift scenarios: one tier, the fast backend is the one that changes.
POOL = {
    "pool-fast": Spec("pool-fast", "pool", (0.5, 1.5), dict(ttft_s=0.3, tokens_per_s=150.0, answer_tokens=120)),
    "pool-mid": Spec("pool-mid", "pool", (0.6, 2.2), dict(ttft_s=0.5, tokens_per_s=100.0, answer_tokens=120)),
    "pool-slow": Spec("pool-slow", "pool", (3.0, 15.0), dict(ttft_s=0.8, tokens_per_s=60.0, answer_tokens=120)),
}
POOL_DEADLINE_S = 4.0  # unscaled; every healthy pool backend meets it, the slowed one does not
SLOWED = dict(ttft_s=2.0, tokens_per_s=30.0)

Client = type[Ours] | type[Theirs]


def _prompt(rng: random.Random, chars: int) -> str:
    words = "route the request to a backend that meets its deadline at the lowest cost".split()
    text = ""
    while len(text) < chars:
        text += rng.choice(words) + " "
    return text[:chars]


def mixed_workload(n: int, rate: float, scale: float, seed: int, threshold_chars: int) -> list[Job]:
    """Long prompts need the heavy tier (by our length scorer; LiteLLM is told the same tier)."""
    rng = random.Random(seed)
    scorer = build_scorer("length", threshold_chars=threshold_chars)
    jobs = []
    for i, at in enumerate(arrivals(n, rate, seed)):
        heavy = rng.random() < 0.45
        prompt = _prompt(rng, rng.randint(700, 3000) if heavy else rng.randint(40, 500))
        tier = "light" if scorer.score([{"role": "user", "content": prompt}]).value < 0.5 else "heavy"
        max_tokens = rng.choice((None, 128, 256)) if heavy else rng.choice((None, 64, 200, 400))
        deadline = rng.choice(HEAVY_DEADLINES_S if heavy else LIGHT_DEADLINES_S) * scale
        jobs.append(Job(i, prompt, tier, max_tokens, deadline, at))
    return jobs


def pool_workload(n: int, rate: float, scale: float, seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [Job(i, _prompt(rng, rng.randint(40, 400)), "pool", None, POOL_DEADLINE_S * scale, at)
            for i, at in enumerate(arrivals(n, rate, seed))]


# -- the mixed workload -----------------------------------------------------------------------------

async def mixed_run(client_type: Client, setup: Setup, base_url: str, control, jobs: list[Job]) -> Run:
    await asyncio.to_thread(control.reset)
    rng = random.Random(1234)
    faults = [rng.choice(FLAKY_FAULTS) if rng.random() < FLAKY_FAULT_RATE else None for _ in range(5 * len(jobs))]
    await asyncio.to_thread(control.set_faults, SPECS["flaky"].model, faults)
    bill = Bill(SPECS, setup.scale)
    client = client_type(setup, base_url, bill)
    await client.warm_up()

    async def degrade() -> None:
        bill.profiles["degrader"].update(DEGRADED)
        await asyncio.to_thread(control.update_profile, SPECS["degrader"].model,
                                **SPECS["degrader"].scaled(setup.scale, **DEGRADED))

    try:
        outcomes = await drive(client, jobs, {len(jobs) // 2: degrade})
    finally:
        await client.close()
    return Run(client.name, jobs, outcomes, bill.total)


def _hogs(n: int) -> list[subprocess.Popen]:
    """`n` processes that spin on a core each: the loaded box the routers must not lose requests on."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def reasons(run: Run, tier_rank: Mapping[str, int], tier_of: Mapping[str, str]) -> Counter[str]:
    """Why requests failed, and what failed before each quality miss (a weaker tier answering)."""
    found: Counter[str] = Counter()
    for o, j in zip(run.outcomes, run.jobs):
        if not o.ok:
            found[f"failed: {o.why}"] += 1
        elif tier_rank[tier_of.get(o.backend, j.tier)] < tier_rank[j.tier]:
            found[f"quality miss after: {o.why or '?'}"] += 1
    return found


ROWS = [("deadline hits", "deadline_hits", "{:.1%}"), ("quality misses (heavy->light)", "quality_misses", "{:.1%}"),
        ("in time and at quality", "good", "{:.1%}"), ("failed", "failed", "{:.1%}"),
        ("p50 latency, capped (s)", "p50_s", "{:.3f}"), ("p95 latency, capped (s)", "p95_s", "{:.3f}"),
        ("p99 latency, capped (s)", "p99_s", "{:.3f}"), ("cost ($)", "cost_usd", "{:.4f}")]


def _cell(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def report_mixed(results: Mapping[str, list[dict[str, float]]], args, why: Mapping[str, Counter[str]],
                 load: tuple[float, float]) -> None:
    names = list(results)
    print(f"\nMixed workload: {args.requests} requests, ~{args.rate:g}/s open loop, {args.runs} runs (median "
          f"[min-max]). SIMULATED backends, timings x{args.scale:g}; 'degrader' slows at request "
          f"{args.requests // 2}; 'flaky' fails {FLAKY_FAULT_RATE:.0%} of calls (500 or hang). No priors for either. "
          f"{args.hog} CPU hog(s) beside both routers; load average {load[0]:.1f} at start, {load[1]:.1f} at end.")
    width = 30
    print(f"{'':32}" + "".join(f"{n:>{width}}" for n in names))
    for label, key, fmt in ROWS:
        print(f"{label:32}" + "".join(f"{_cell([r[key] for r in results[n]], fmt):>{width}}" for n in names))
    for name in names:
        if why.get(name):
            print(f"  {name}, over all runs: " + "; ".join(f"{count} {what}" for what, count in why[name].most_common()))


# -- drift scenarios --------------------------------------------------------------------------------

def _pool_setup(args) -> Setup:
    return Setup(POOL, [("pool", None, list(POOL))], args.scale, cooldown_s=10.0 * args.scale,
                 hedge=args.hedge, litellm_args=_litellm_args(args))


async def _scenario(kind: str, client_type: Client, setup: Setup, base_url: str, control, jobs: list[Job],
                    at: tuple[int, int]) -> dict[str, float]:
    """One scenario run; what the router did after the change at request `at[0]` (and `at[1]`)."""
    await asyncio.to_thread(control.reset)
    bill = Bill(POOL, setup.scale)
    names = ["pool-mid", "pool-slow"] if kind == "cold" else None
    client = client_type(setup, base_url, bill, names)
    await client.warm_up()
    sent_at_change: list[int] = []
    fast = POOL["pool-fast"].model

    async def change() -> None:
        sent_at_change.append((await asyncio.to_thread(control.stats, fast))["requests"])
        if kind == "slow":
            bill.profiles["pool-fast"].update(SLOWED)
            await asyncio.to_thread(control.update_profile, fast, **POOL["pool-fast"].scaled(setup.scale, **SLOWED))
        elif kind == "outage":
            await asyncio.to_thread(control.update_profile, fast, fault="500", fault_rate=1.0)
        else:
            await client.add_backend("pool-fast")

    async def recover() -> None:
        await asyncio.to_thread(control.update_profile, fast, fault=None)

    events: dict[int, Callable] = {at[0]: change}
    if kind == "outage":
        events[at[1]] = recover
    try:
        outcomes = await drive(client, jobs, events)
    finally:
        await client.close()
    sent_after = (await asyncio.to_thread(control.stats, fast))["requests"] - sent_at_change[0]
    return _reaction(kind, outcomes, jobs, at, sent_after)


def _reaction(kind: str, outcomes, jobs: list[Job], at: tuple[int, int], sent_after: int) -> dict[str, float]:
    late = [not (o.ok and o.elapsed_s <= j.deadline_s) for o, j in zip(outcomes, jobs)]
    out = {"misses_after": sum(late[at[0]:]), "failed": sum(not o.ok for o in outcomes)}
    if kind == "slow":
        return {**out, "sent_to_slowed": sent_after}
    start = at[1] if kind == "outage" else at[0]
    by_fast = [i for i in range(start, len(jobs)) if outcomes[i].ok and outcomes[i].backend == "pool-fast"]
    return {**out, "requests_to_use": (by_fast[0] - start) if by_fast else len(jobs) - start,
            "share_after": len(by_fast) / (len(jobs) - start)}


SCENARIOS = {
    "slow": "the fast backend slows past the deadline at request {a}",
    "outage": "the fast backend fails every call from request {a} to {b}, then recovers",
    "cold": "the fast backend is added cold at request {a}",
}
REACTION_ROWS = {
    "slow": [("calls sent to it after it slowed", "sent_to_slowed", "{:.0f}")],
    "outage": [("requests after recovery until it answers", "requests_to_use", "{:.0f}"),
               ("its share of requests after recovery", "share_after", "{:.0%}")],
    "cold": [("requests after it appears until it answers", "requests_to_use", "{:.0f}"),
             ("its share of the rest", "share_after", "{:.0%}")],
}


def report_scenario(kind: str, results: Mapping[str, list[dict[str, float]]], at: tuple[int, int], args) -> None:
    names = list(results)
    print(f"\nScenario '{kind}': {SCENARIOS[kind].format(a=at[0], b=at[1])} ({args.scenario_requests} requests, "
          f"~{args.scenario_rate:g}/s, deadline {POOL_DEADLINE_S * args.scale:.2f}s, {args.scenario_runs} run(s))")
    rows = [*REACTION_ROWS[kind], ("deadline misses from the change on", "misses_after", "{:.0f}"),
            ("failed requests", "failed", "{:.0f}")]
    for label, key, fmt in rows:
        print(f"  {label:44}" + "".join(f"{_cell([r[key] for r in results[n]], fmt):>22}" for n in names))


# -- main -------------------------------------------------------------------------------------------

def _litellm_args(args) -> dict:
    return {"ttl": args.litellm_ttl, "lowest_latency_buffer": args.litellm_buffer}


async def main(args) -> None:
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)  # its pricing notes on custom models
    clients: list[Client] = [Ours, Theirs]
    started = time.perf_counter()
    setup = Setup(SPECS, TIERS, args.scale, cooldown_s=30.0 * args.scale, on_deadline_risk=args.mode,
                  hedge=args.hedge, litellm_args=_litellm_args(args))
    mixed: dict[str, list[dict[str, float]]] = {}
    tier_rank = {"light": 0, "heavy": 1}
    tier_of = {name: spec.tier for name, spec in SPECS.items()}
    why: dict[str, Counter[str]] = {}
    hogs = _hogs(args.hog)
    load = os.getloadavg()[0]
    try:
        with simulator(SPECS, args.scale) as (base_url, control):
            for run in range(args.runs):
                jobs = mixed_workload(args.requests, args.rate, args.scale, args.seed + run, setup.threshold_chars)
                for client_type in clients:
                    result = await mixed_run(client_type, setup, base_url, control, jobs)
                    label = f"{result.name} ({args.mode})" if client_type is Ours else result.name
                    mixed.setdefault(label, []).append(score(result, tier_rank, tier_of))
                    why.setdefault(label, Counter()).update(reasons(result, tier_rank, tier_of))
        load_end = os.getloadavg()[0]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    report_mixed(mixed, args, why, (load, load_end))
    if not args.scenarios:
        print(f"\n(total {time.perf_counter() - started:.0f} s)")
        return
    pool = _pool_setup(args)
    n = args.scenario_requests
    marks = {"slow": (n * 3 // 10, n), "outage": (n // 5, n // 2), "cold": (n * 3 // 10, n)}
    with simulator(POOL, args.scale) as (base_url, control):
        for kind in args.scenarios:
            results: dict[str, list[dict[str, float]]] = {}
            for run in range(args.scenario_runs):
                jobs = pool_workload(n, args.scenario_rate, args.scale, args.seed + 100 + run)
                for client_type in clients:
                    outcome = await _scenario(kind, client_type, pool, base_url, control, jobs, marks[kind])
                    results.setdefault(client_type.name, []).append(outcome)
            report_scenario(kind, results, marks[kind], args)
    print(f"\n(total {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=240, help="mixed-workload requests per run")
    parser.add_argument("--rate", type=float, default=12.0, help="requests per second (Poisson arrivals)")
    parser.add_argument("--runs", type=int, default=3, help="mixed-workload runs; the table shows the median")
    parser.add_argument("--scale", type=float, default=0.25, help="multiply every simulated timing by this")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hog", type=int, default=0,
                        help="the loaded variant: this many processes spinning beside both routers (2: a busy 2-core box)")
    parser.add_argument("--mode", choices=("best-effort", "downgrade", "fail"), default="best-effort",
                        help="our routing.on_deadline_risk")
    parser.add_argument("--hedge", action=argparse.BooleanOptionalAction, default=True,
                        help="our routing.hedge (on: what we recommend when deadlines matter; shipped off)")
    parser.add_argument("--scenarios", nargs="*", choices=tuple(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--scenario-requests", type=int, default=100)
    parser.add_argument("--scenario-rate", type=float, default=15.0)
    parser.add_argument("--scenario-runs", type=int, default=1)
    parser.add_argument("--litellm-ttl", type=float, default=10.0, help="routing_strategy_args.ttl (docs: 10)")
    parser.add_argument("--litellm-buffer", type=float, default=0.5,
                        help="routing_strategy_args.lowest_latency_buffer (docs: 0.5)")
    asyncio.run(main(parser.parse_args()))
