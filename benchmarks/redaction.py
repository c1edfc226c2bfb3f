"""What redacting a stream costs on the streaming hot path.

    python benchmarks/redaction.py [--repeat 30] [--tokens 1000] [--code DIR]

A 1,000-token answer streamed as one chunk per token (English-like words, so a secret's first
letter is common in it and the holder has work to do), measured two ways in the same run:

1. the redactor alone, per chunk: no secret set (no redactor at all), the per-chunk redaction
   of before (each chunk looked at alone, which let a key split across chunks through), and the
   stream redactor (router/redaction.py) with 1 and with 3 secrets;
2. the whole call path (`CallPath.stream` over an in-process fake backend): with no secret set,
   and with 3 set (the stream redactor in the path); with `--code DIR`, also the call path of
   another checkout (e.g. the one before this change), in a process of its own, as the baseline.

Prints the best of `--repeat` runs (taken in turn) and ratios against the baselines measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from backends.base import BackendSettings
from backends.deadline import Deadline
from backends.fake import FakeBackend, FakeStep
from backends.types import Request, TextChunk
from policies.breaker import BreakerBoard
from router.calls import CallOptions, CallPath
from router.redaction import Redactor

VARIABLES = ["BENCH_KEY_A", "BENCH_KEY_B", "BENCH_KEY_C"]
VALUES = ["sk-bench-" + "q7" * 20, "sk-ant-api03-" + "zX9" * 20, "AIzaSyBench" + "k" * 28]
WORDS = ("the system uses keys and tokens so this is a simple test of streams with several short "
         "words such as sky sea ski sk skill ask risk desk masks tasks").split()


def _answer(tokens: int) -> str:
    rng = random.Random(7)
    return " ".join(rng.choice(WORDS) for _ in range(tokens))


def _per_chunk_before(redactor: Redactor) -> Callable[[TextChunk], object]:
    """The redaction of before this change: each chunk's text alone."""
    def redact(chunk: TextChunk) -> object:
        secrets = sorted((v for v in map(os.environ.get, redactor.variables) if v), key=len, reverse=True)
        text = chunk.text
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, "[REDACTED]")
        return chunk if text == chunk.text else TextChunk(text)
    return redact


def _best(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Seconds per run of each, the best of `repeat`, taken in turn so that every one sees the
    same machine (on a shared box the noise is one-sided: the best is the cost itself)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for label, run in runs.items():
            started = time.perf_counter()
            run()
            best[label] = min(best[label], time.perf_counter() - started)
    return best


def _with(count: int, run: Callable[[], object]) -> Callable[[], object]:
    """`run` with the first `count` secrets set (and the others not)."""
    def wrapped() -> object:
        for name in VARIABLES:
            os.environ.pop(name, None)
        for name, value in zip(VARIABLES[:count], VALUES[:count]):
            os.environ[name] = value
        return run()
    return wrapped


def alone(chunks: list[TextChunk], repeat: int) -> dict[str, float]:
    redactor = Redactor(VARIABLES)
    before = _per_chunk_before(redactor)

    def stream() -> None:
        holder = redactor.stream()
        assert holder is not None
        for chunk in chunks:
            holder.chunk(chunk)

    return _best({"no redactor": lambda: [c for c in chunks],
                  "per chunk, before (3 secrets)": _with(3, lambda: [before(c) for c in chunks]),
                  "stream redactor (1 secret)": _with(1, stream),
                  "stream redactor (3 secrets)": _with(3, stream)}, repeat)


async def _path_once(text: str) -> None:
    backend = FakeBackend(BackendSettings(name="fake", model="fake"), steps=[FakeStep(text=text)])
    path = CallPath(lambda name: backend, breakers=BreakerBoard(time.monotonic), redactor=Redactor(VARIABLES))
    options = CallOptions(deadline=Deadline(60.0))
    async for _ in path.stream("fake", Request([{"role": "user", "content": "hi"}]), options):
        pass


def through_path(text: str, repeat: int) -> dict[str, float]:
    once = lambda: asyncio.run(_path_once(text))  # noqa: E731
    return _best({"call path, no secret set": _with(0, once), "call path, 3 secrets": _with(3, once)}, repeat)


_OTHER = """
import asyncio, json, os, sys, time
from backends.base import BackendSettings
from backends.deadline import Deadline
from backends.fake import FakeBackend, FakeStep
from backends.types import Request
from policies.breaker import BreakerBoard
from router.calls import CallOptions, CallPath
from router.redaction import Redactor

text, repeat, names, values = json.loads(sys.argv[1])

async def once():
    backend = FakeBackend(BackendSettings(name="fake", model="fake"), steps=[FakeStep(text=text)])
    path = CallPath(lambda name: backend, breakers=BreakerBoard(time.monotonic), redactor=Redactor(names))
    async for _ in path.stream("fake", Request([{"role": "user", "content": "hi"}]), CallOptions(deadline=Deadline(60.0))):
        pass

best = {}
for _ in range(repeat):
    for count in (0, 3):
        for name in names:
            os.environ.pop(name, None)
        os.environ.update(zip(names[:count], values[:count]))
        started = time.perf_counter()
        asyncio.run(once())
        best[count] = min(best.get(count, 1e9), time.perf_counter() - started)
print(json.dumps(best))
"""


def other_checkout(code: Path, text: str, repeat: int) -> dict[str, float]:
    """The call-path figures of the checkout at `code`, measured in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", _OTHER, json.dumps([text, repeat, VARIABLES, VALUES])],
                          capture_output=True, text=True, env=env, cwd=code, check=True)
    best = json.loads(done.stdout)
    return {"no secret set": best["0"], "3 secrets": best["3"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--code", type=Path, help="another checkout whose call path is measured as the baseline")
    args = parser.parse_args()
    text = _answer(args.tokens)
    chunks = [TextChunk(w if i == 0 else " " + w) for i, w in enumerate(text.split(" "))]
    print(f"{len(chunks)} chunks per stream, best of {args.repeat} runs")
    figures = alone(chunks, args.repeat)
    base = figures["per chunk, before (3 secrets)"]
    for label, seconds in figures.items():
        print(f"  {label:34s} {seconds * 1e6 / len(chunks):7.2f} µs/chunk   x{seconds / base:5.2f} of before")
    path = through_path(text, args.repeat)
    base = path["call path, no secret set"]
    if args.code is not None:
        other = other_checkout(args.code.resolve(), text, args.repeat)
        base = other["no secret set"]
        for label, seconds in other.items():
            print(f"  {f'{args.code}: call path, {label}':34s} {seconds * 1e3:7.2f} ms/stream  x{seconds / base:5.2f}")
    for label, seconds in path.items():
        print(f"  {label:34s} {seconds * 1e3:7.2f} ms/stream  x{seconds / base:5.2f}")


if __name__ == "__main__":
    main()
