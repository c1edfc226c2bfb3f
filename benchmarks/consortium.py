"""Consortium wall time against its floor and against llm-consortium, on the same simulated models.

    .venv/bin/python benchmarks/consortium.py [--repeats 5] [--no-llm-consortium]

Five simulated members answer after 0.2, 0.6, 1.0, 1.5 and 2.0 s; a simulated fast arbiter
after 0.05 s. Measured in the same run:
  floor          the slowest member alone plus the arbiter alone (direct calls, no consortium)
  route          our consortium (rank), all five members
  route quorum=3 the same, proceeding once three answered (the others are cancelled)
  llm-consortium the `llm` plugin on the same five models and arbiter (OpenAI-compatible models
                 pointed at the simulator through extra-openai-models.yaml in a temp LLM_USER_PATH)
Target: route within 10% of the floor. Then the user's nested example (examples/nested_consortium.yaml,
simulator's default glm-5.2 / k2.6 / mercury-2 timings): model calls, tokens, cost and wall time.
Every answer is SIMULATED.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.simulator import DEFAULT_PROFILES, SimProfile, SimServer  # noqa: E402
from backends.types import content_text  # noqa: E402
from router.config_loader import parse_config  # noqa: E402
from router.consortium.simulated import arbiter_responder  # noqa: E402
from router.core import Router  # noqa: E402

LATENCIES = (0.2, 0.6, 1.0, 1.5, 2.0)  # seconds to each member's whole answer
MEMBERS = [f"bench-m{i + 1}" for i in range(len(LATENCIES))]
ARBITER = "bench-arb"
ARBITER_S = 0.05
_OURS = arbiter_responder(confidence=0.9)


def _respond(messages) -> str:
    """The simulated arbiter: our format for our prompts, llm-consortium's for its prompts."""
    text = "\n".join(content_text(m.get("content")) for m in messages)
    if re.search(r"<ranking-[0-9a-f]+>", text):
        return _OURS(messages)
    ids = re.findall(r"--- RESPONSE (\d+)", text)
    ranks = "".join(f'<rank position="{i + 1}">{rid}</rank>' for i, rid in enumerate(ids))
    return (f"Reasoning: simulated.\n<ranking>{ranks}</ranking>\n<synthesis>simulated synthesis</synthesis>\n"
            "<confidence>0.9</confidence>\n<needs_iteration>false</needs_iteration>")


def profiles() -> dict[str, SimProfile]:
    out = dict(DEFAULT_PROFILES)
    for name, latency in zip(MEMBERS, LATENCIES, strict=True):
        out[name] = SimProfile(ttft_s=latency, tokens_per_s=None, answer_tokens=60)
    out[ARBITER] = SimProfile(ttft_s=ARBITER_S, tokens_per_s=None, responder=_respond)
    out["mercury-2"] = dataclasses.replace(out["mercury-2"], responder=_OURS)
    return out


def bench_config(base_url: str) -> dict:
    backends = {n: {"kind": "openai", "model": n, "base_url": base_url} for n in [*MEMBERS, ARBITER]}
    return {
        "backends": backends,
        "routing": {"tiers": [{"name": "all", "backends": [MEMBERS[0]]}]},
        "consortia": {
            "bench-cns": {"members": MEMBERS, "arbiter": ARBITER, "judging": "rank"},
            "bench-quorum": {"members": MEMBERS, "arbiter": ARBITER, "judging": "rank", "quorum": 3},
        },
    }


async def _timed(router: Router, model: str, prompt, repeats: int) -> tuple[float, object]:
    await router.acomplete(prompt, model=model)  # warm the connection pool
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = await router.acomplete(prompt, model=model)
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


async def measure_route(base_url: str, repeats: int) -> dict[str, float]:
    async with Router.from_config(bench_config(base_url)) as router:
        slowest, _ = await _timed(router, MEMBERS[-1], "Explain CRDTs.", repeats)
        # The arbiter alone, on the very prompt the consortium sends it.
        _, sample = await _timed(router, "bench-cns", "Explain CRDTs.", 1)
        arb_prompt = _arbiter_messages(sample)
        arbiter, _ = await _timed(router, ARBITER, arb_prompt, repeats)
        ours, result = await _timed(router, "bench-cns", "Explain CRDTs.", repeats)
        quorum, qresult = await _timed(router, "bench-quorum", "Explain CRDTs.", repeats)
    return {"slowest": slowest, "arbiter": arbiter, "route": ours, "route_calls": result.completion.metadata["calls"],
            "quorum": quorum, "quorum_calls": qresult.completion.metadata["calls"]}


def _arbiter_messages(result) -> list[dict]:
    """Rebuild the arbiter prompt of a finished run (same candidates, fresh nonce)."""
    from policies.judging import code_metrics
    from router.consortium.prompts import Candidate, arbiter_prompt

    members = result.completion.metadata["trace"]["rounds"][0]["members"]
    cands = [Candidate(m["text"], f"{m['member']}#{m['sample']}", code_metrics(m["text"])) for m in members]
    return arbiter_prompt([{"role": "user", "content": "Explain CRDTs."}], cands, judging="rank",
                          nonce="0123456789abcdef", context_tokens=8192, reply_tokens=1024).messages


def measure_llm_consortium(base_url: str, repeats: int) -> float | None:
    """Median wall time of llm-consortium (rank, one iteration) on the same simulated models."""
    home = tempfile.mkdtemp(prefix="llm-bench-")
    os.environ["LLM_USER_PATH"] = home
    # llm-consortium keeps its log and sqlite db in click's app dir, ignoring LLM_USER_PATH:
    # point XDG_CONFIG_HOME into the temp dir too, so the real user's dirs are never touched.
    os.environ["XDG_CONFIG_HOME"] = home
    Path(home, "io.datasette.llm").mkdir()
    lines = [f"- model_id: {n}\n  model_name: {n}\n  api_base: {base_url}\n" for n in [*MEMBERS, ARBITER]]
    Path(home, "extra-openai-models.yaml").write_text("".join(lines))
    try:
        import llm_consortium
    except ImportError:
        print("llm-consortium is not installed (pip install llm llm-consortium); skipping it", file=sys.stderr)
        return None
    import logging

    logging.getLogger().setLevel(logging.CRITICAL)  # its import sets root logging to print errors

    def once() -> float:
        orchestrator = llm_consortium.create_consortium(models=MEMBERS, arbiter=ARBITER, judging_method="rank",
                                                        max_iterations=1, confidence_threshold=0.8)
        started = time.perf_counter()
        result = orchestrator.orchestrate("Explain CRDTs.")
        elapsed = time.perf_counter() - started
        if not result["synthesis"].get("synthesis"):
            raise RuntimeError(f"llm-consortium returned no answer: {result['synthesis']}")
        return elapsed

    once()  # warm-up: model registry, sqlite log db
    return statistics.median(once() for _ in range(repeats))


async def measure_nested(base_url: str) -> dict:
    text = (ROOT / "examples" / "nested_consortium.yaml").read_text().replace("http://127.0.0.1:8000/v1", base_url)
    from router.consortium.graph import calls_per_run

    loaded = parse_config(text, "examples/nested_consortium.yaml")
    async with Router(loaded) as router:
        started = time.perf_counter()
        result = await router.acomplete("Explain CRDTs in five lines.", model="cns-meta-glm-kimi")
        wall = time.perf_counter() - started
    c = result.completion
    return {"calls": c.metadata["calls"], "expected": calls_per_run("cns-meta-glm-kimi", loaded.config.consortia),
            "input_tokens": c.usage.input_tokens, "output_tokens": c.usage.output_tokens, "cost": c.cost_usd,
            "wall": wall, "rounds": len(c.metadata["trace"]["rounds"])}


def _requests(stats: dict) -> int:
    return sum(s["requests"] for m, s in stats.items() if m.startswith("bench-"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-llm-consortium", action="store_true")
    args = parser.parse_args()
    with SimServer(profiles()) as sim:
        r = asyncio.run(measure_route(sim.base_url, args.repeats))
        before = _requests(sim.stats())
        theirs = None if args.no_llm_consortium else measure_llm_consortium(sim.base_url, args.repeats)
        their_calls = (_requests(sim.stats()) - before) / (args.repeats + 1)  # +1: the warm-up run
        sim.reset()
        nested = asyncio.run(measure_nested(sim.base_url))
        stats = sim.stats()
    floor = r["slowest"] + r["arbiter"]
    print(f"SIMULATED members answering after {', '.join(f'{s:g}' for s in LATENCIES)} s; arbiter {ARBITER_S:g} s; "
          f"median of {args.repeats}")
    print(f"{'':28}{'wall s':>9}{'vs floor':>10}{'calls':>7}")
    print(f"{'floor (slowest + arbiter)':28}{floor:9.3f}{1.0:10.3f}{'':>7}")
    print(f"{'  slowest member alone':28}{r['slowest']:9.3f}")
    print(f"{'  arbiter alone':28}{r['arbiter']:9.3f}")
    print(f"{'route consortium (rank)':28}{r['route']:9.3f}{r['route'] / floor:10.3f}{r['route_calls']:7d}")
    print(f"{'route, quorum 3 of 5':28}{r['quorum']:9.3f}{r['quorum'] / floor:10.3f}{r['quorum_calls']:7d}")
    if theirs is not None:
        print(f"{'llm-consortium (rank)':28}{theirs:9.3f}{theirs / floor:10.3f}{their_calls:7.0f}")
        print(f"route / llm-consortium: {r['route'] / theirs:.3f}")
    verdict = "MET" if r["route"] <= 1.10 * floor else "MISSED"
    print(f"target route <= 1.10 x floor: {verdict} ({(r['route'] / floor - 1) * 100:+.1f}%)")
    print()
    print("user's nested example (cns-meta-glm-kimi: cns-glm = glm-5.2*5 and cns-kimi = k2.6*5, rank by "
          "mercury-2; mercury-2 synthesizes), SIMULATED")
    print(f"  model calls {nested['calls']} (expected {nested['expected']}: 5+1 + 5+1 + 1), rounds {nested['rounds']}")
    print(f"  tokens in {nested['input_tokens']}, out {nested['output_tokens']}, cost ${nested['cost']:.6f}, "
          f"wall {nested['wall']:.3f} s")
    print("  requests seen by the simulator: " + ", ".join(f"{m} {s['requests']}" for m, s in sorted(stats.items())))


if __name__ == "__main__":
    main()
