"""Microseconds per routing decision for the complexity scorer, beside the length baseline.

    .venv/bin/python benchmarks/scorer_speed.py [DIR] [--repeat 3]

Times `scorer.score(messages)` (a full decision with its explanation) once per prompt of every
routing set in DIR (default ../shared/data/routing, else the committed sample), `repeat`
rounds, and prints the median and p99 against the targets (30 us, 200 us), the same for
`LengthScorer` (timed on each prompt right after the learned scorer, so the two meet the same
load: on a busy shared machine read the ratio, which should stay near 8x or below), plus the
loaded scorer's memory (tracemalloc) and load time.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.routing_data import routing_sets
from policies.complexity import ComplexityScorer
from policies.length import LengthScorer


def _timings(scorers, conversations, repeat: int) -> list[list[float]]:
    """Microseconds per decision for each scorer, timed in turn on each prompt so that all of
    them meet the same load (on a shared machine the ratio is steadier than either figure)."""
    out: list[list[float]] = [[] for _ in scorers]
    clock = time.perf_counter_ns
    for _ in range(repeat):
        for messages in conversations:
            for scorer, times in zip(scorers, out):
                t0 = clock()
                scorer.score(messages)
                times.append((clock() - t0) / 1000.0)
    return out


def _summary(name: str, us: list[float]) -> str:
    us = sorted(us)
    p99 = us[min(len(us) - 1, int(0.99 * len(us)))]
    return f"{name:8s} median {statistics.median(us):7.2f} us   p99 {p99:8.2f} us   ({len(us)} decisions)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    records = [r for rs in routing_sets(args.data).values() for r in rs]
    conversations = [[{"role": "user", "content": r["prompt"]}] for r in records]

    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    scorer = ComplexityScorer.load()
    load_ms = (time.perf_counter() - t0) * 1000
    memory_mb = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()

    gc.disable()  # keep collector pauses out of the per-decision timings
    learned, length = _timings([scorer, LengthScorer()], conversations, args.repeat)
    gc.enable()
    huge = [{"role": "user", "content": "word " * 200_000}]  # 1 MB
    huge_us = min(_timings([scorer], [huge], 5)[0])

    print(_summary("learned", learned))
    print(_summary("length", length))
    print(f"ratio    median learned / length = {statistics.median(learned) / statistics.median(length):.1f}x")
    med, p99 = statistics.median(learned), sorted(learned)[int(0.99 * (len(learned) - 1))]
    print(f"targets  median {med:.1f} < 30 us: {'met' if med < 30 else 'MISSED'};  p99 {p99:.1f} < 200 us: "
          f"{'met' if p99 < 200 else 'MISSED'}")  # fmt: skip
    print(f"1 MB prompt: {huge_us:.1f} us")
    print(f"loaded scorer: {memory_mb:.2f} MB (tracemalloc), loaded in {load_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
