"""Microseconds per routing decision for the complexity scorer, beside the length baseline.

    .venv/bin/python benchmarks/scorer_speed.py [--repeat 3]

Times `scorer.score(messages)` (a full decision with its explanation) once per shared prompt
(RouteLLM GSM8K + MMLU records, Ong et al., 2024), `repeat` rounds, and prints the median and
p99, the same for `LengthScorer`, plus the loaded scorer's memory (tracemalloc) and load time.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from pathlib import Path

from policies.complexity import ComplexityScorer
from policies.complexity.fit import DEFAULT_DATA, load_records
from policies.length import LengthScorer


def _timings(scorer, conversations, repeat: int) -> list[float]:
    out = []
    clock = time.perf_counter_ns
    for _ in range(repeat):
        for messages in conversations:
            t0 = clock()
            scorer.score(messages)
            out.append((clock() - t0) / 1000.0)  # microseconds
    return out


def _summary(name: str, us: list[float]) -> str:
    us = sorted(us)
    p99 = us[min(len(us) - 1, int(0.99 * len(us)))]
    return f"{name:8s} median {statistics.median(us):7.2f} us   p99 {p99:8.2f} us   ({len(us)} decisions)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="*", type=Path, default=list(DEFAULT_DATA))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    conversations = [[{"role": "user", "content": r["prompt"]}] for r in load_records(args.data)]

    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    scorer = ComplexityScorer.load()
    load_ms = (time.perf_counter() - t0) * 1000
    memory_mb = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()

    gc.disable()  # keep collector pauses out of the per-decision timings
    learned = _timings(scorer, conversations, args.repeat)
    length = _timings(LengthScorer(), conversations, args.repeat)
    gc.enable()
    huge = [{"role": "user", "content": "word " * 200_000}]  # 1 MB
    huge_us = min(_timings(scorer, [huge], 5))

    print(_summary("learned", learned))
    print(_summary("length", length))
    print(f"ratio    median learned / length = {statistics.median(learned) / statistics.median(length):.1f}x")
    print(f"1 MB prompt: {huge_us:.1f} us")
    print(f"loaded scorer: {memory_mb:.2f} MB (tracemalloc), loaded in {load_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
