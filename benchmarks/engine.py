"""The in-process DiffusionGemma engine: tokens per forward pass and wall time per canvas.

    .venv/bin/python benchmarks/engine.py                     # tiny random-weight model, CPU, ~1 min
    .venv/bin/python benchmarks/engine.py --model /models/diffusiongemma-26B-A4B-it --device cuda
    .venv/bin/python benchmarks/engine.py --device cuda --size full   # published shapes, random weights

Without --model it builds the tiny checkpoint (backends/diffusion/tiny.py) in a temporary
directory. With --model it loads real weights from that directory (or a hub id already in the
local cache) exactly as the diffusion-local backend does; on a GPU machine install the CUDA
build of torch and `pip install 'latency-router[local]'` first (plus `accelerate` to load
straight onto the GPU). Nothing else changes between the two runs.

Three ways of running the same prompts, all measured in this run:

  raw        transformers' `model.generate()` with no streamer: the engine's own speed
  backend    the diffusion-local backend's complete() (worker thread, queue, streamer, no drafts)
  stream     its stream(): a draft decoded and delivered after every denoising step
  fixed      the backend with adaptive stopping disabled (every canvas runs max_denoising_steps)

Then 4 concurrent requests, served one after another (max_batch 1) and batched (max_batch 4),
interleaved in the same run: wall time, committed tokens per second, the throughput ratio.

`--size full` instead builds the published architecture (25 B parameters) with random weights on
the GPU and times one denoising step and one canvas at batch 1 and 4 (benchmarks/engine_full.py);
without a CUDA GPU it says so and exits 0.

Printed per mode: canvases, denoising steps (forward passes), tokens per forward pass,
milliseconds per forward pass and per canvas, committed tokens per second; then the ratios
backend/raw (our overhead) and adaptive/fixed (what adaptive stopping saves). The tiny model's
random weights never become confident, so on it adaptive and fixed coincide; real weights stop
early (about 16 tokens per step is reported for DiffusionGemma on an H100).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROMPTS = [
    "Why is the sky blue?",
    "Write a Python function that adds two numbers and returns the sum.",
    "How do birds fly?",
    "What makes rain fall?",
    "Explain what a router does for a language model.",
]


@dataclass
class Figures:
    mode: str
    requests: int
    canvases: int
    steps: int
    tokens: int
    seconds: float
    batches: int = 0  # engine batches the requests ran in (concurrent modes only)

    @property
    def tokens_per_forward(self) -> float:
        return self.tokens / self.steps if self.steps else float("nan")

    @property
    def ms_per_forward(self) -> float:
        return 1000 * self.seconds / self.steps if self.steps else float("nan")

    @property
    def ms_per_canvas(self) -> float:
        return 1000 * self.seconds / self.canvases if self.canvases else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else float("nan")

    def row(self) -> dict:
        return {**asdict(self), "tokens_per_forward": self.tokens_per_forward, "ms_per_forward": self.ms_per_forward,
                "ms_per_canvas": self.ms_per_canvas, "tokens_per_s": self.tokens_per_s}


async def _through_backend(backend, mode: str, prompts: list[str], extra: dict, max_new: int) -> Figures:
    from backends.types import Request

    canvases = steps = tokens = 0
    seconds = 0.0
    for i, prompt in enumerate(prompts):
        request = Request(messages=[{"role": "user", "content": prompt}], max_tokens=max_new,
                          extra={"seed": i, **extra}, timeout_s=3600)
        started = time.perf_counter()
        if mode == "stream":  # drafts decoded and delivered after every denoising step
            completion = [c async for c in backend.stream(request)][-1].completion
        else:
            completion = await backend.complete(request)
        seconds += time.perf_counter() - started
        canvases += completion.diffusion.canvases
        steps += completion.diffusion.denoising_steps or 0
        tokens += completion.usage.output_tokens
    return Figures(mode, len(prompts), canvases, steps, tokens, seconds)


def _raw(engine, prompts: list[str], max_new: int) -> Figures:
    """transformers' generate() alone; forward passes counted from its tokens-per-forward figure."""
    import torch

    model, loaded = engine.loaded.model, engine.loaded
    config = engine.generation_config({"max_new_tokens": max_new})
    pad = config.pad_token_id
    canvases = steps = tokens = 0
    seconds = 0.0
    for i, prompt in enumerate(prompts):
        ids = engine.encode([{"role": "user", "content": prompt}]).to(model.device)
        torch.manual_seed(i)
        if loaded.device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        out = model.generate(ids, generation_config=config)
        if loaded.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds += time.perf_counter() - started
        new = out.sequences[0, ids.shape[1]:]
        real = int((new != pad).sum()) if pad is not None else new.numel()
        canvases += new.numel() // loaded.canvas_length
        tokens += real
        steps += round(real / float(out.tokens_per_forward[0])) if real else 0
    return Figures("raw", len(prompts), canvases, steps, tokens, seconds)


async def _concurrent(backend, engine, mode: str, prompts: list[str], max_new: int) -> Figures:
    """len(prompts) requests at once; `sequential` serves them one at a time, `batched` together."""
    from backends.types import Request

    engine.max_batch = 1 if mode == "sequential" else len(prompts)
    requests = [Request(messages=[{"role": "user", "content": p}], max_tokens=max_new, timeout_s=3600)
                for p in prompts]
    batches = engine.stats["batches"]
    started = time.perf_counter()
    completions = await asyncio.gather(*(backend.complete(r) for r in requests))
    seconds = time.perf_counter() - started
    return Figures(mode, len(prompts), sum(c.diffusion.canvases for c in completions),
                   sum(c.diffusion.denoising_steps or 0 for c in completions),
                   sum(c.usage.output_tokens for c in completions), seconds, engine.stats["batches"] - batches)


async def run(args) -> list[Figures]:
    from backends.base import BackendSettings
    from backends.diffusion.load import read_config
    from backends.diffusion.local import DiffusionLocalBackend

    model = args.model
    if model is None:
        from backends.diffusion.tiny import build_tiny_checkpoint

        model = str(build_tiny_checkpoint(Path(tempfile.mkdtemp(prefix="tiny-dg-"))))
    options = {"device": args.device, "dtype": args.dtype}
    canvas_length = int(read_config(model).canvas_length)
    backend = DiffusionLocalBackend(BackendSettings(name="local", model=model, decoding="diffusion",
                                                    canvas_length=canvas_length, options=options, timeout_s=3600))
    started = time.perf_counter()
    engine = await backend.engine()
    load_s = time.perf_counter() - started
    loaded = engine.loaded
    max_new = args.canvases * loaded.canvas_length
    extra = {"max_denoising_steps": args.max_denoising_steps} if args.max_denoising_steps else {}
    print(f"model {model}\n  {loaded.device}, {loaded.dtype}, canvas {loaded.canvas_length} tokens, "
          f"loaded in {load_s:.1f} s; {len(args.prompts)} prompts x {args.canvases} canvases, "
          f"{args.repeat} repeats (median run shown)", file=sys.stderr)
    await _through_backend(backend, "warm-up", args.prompts[:1], extra, loaded.canvas_length)

    def median(runs: list[Figures]) -> Figures:
        return sorted(runs, key=lambda f: f.seconds)[len(runs) // 2]

    fixed = {**extra, "confidence_threshold": 1e-12}
    runs: dict[str, list[Figures]] = {"raw": [], "backend": [], "stream": [], "fixed": [], "sequential": [],
                                      "batched": []}
    concurrent = (PROMPTS * 4)[:4]
    for _ in range(args.repeat):  # interleaved, so drift in machine load hits every mode alike
        runs["raw"].append(_raw(engine, args.prompts, max_new))
        runs["backend"].append(await _through_backend(backend, "backend", args.prompts, extra, max_new))
        runs["stream"].append(await _through_backend(backend, "stream", args.prompts, extra, max_new))
        runs["fixed"].append(await _through_backend(backend, "fixed", args.prompts, fixed, max_new))
        for mode in ("sequential", "batched"):
            runs[mode].append(await _concurrent(backend, engine, mode, concurrent, max_new))
    await backend.aclose()
    return [median(r) for r in runs.values()]


def report(results: list[Figures], as_json: bool) -> None:
    by = {f.mode: f for f in results}
    ratios = {
        "backend_over_raw_time": by["backend"].seconds / by["raw"].seconds,
        "stream_over_raw_time": by["stream"].seconds / by["raw"].seconds,
        "fixed_over_adaptive_steps": by["fixed"].steps / by["backend"].steps,
        "tokens_per_forward_over_autoregressive": by["backend"].tokens_per_forward / 1.0,
        "batched_over_sequential_throughput": by["batched"].tokens_per_s / by["sequential"].tokens_per_s,
    }
    if as_json:
        print(json.dumps({"modes": [f.row() for f in results], "ratios": ratios}, indent=2))
        return
    print(f"{'mode':<8} {'canvases':>8} {'steps':>6} {'tok/fwd':>8} {'ms/fwd':>8} {'ms/canvas':>10} {'tok/s':>8}")
    for f in results:
        print(f"{f.mode:<8} {f.canvases:>8} {f.steps:>6} {f.tokens_per_forward:>8.2f} {f.ms_per_forward:>8.2f} "
              f"{f.ms_per_canvas:>10.1f} {f.tokens_per_s:>8.1f}")
    print(f"backend / raw wall time:           {ratios['backend_over_raw_time']:.3f}x  (our overhead)")
    print(f"stream / raw wall time:            {ratios['stream_over_raw_time']:.3f}x  (overhead with drafts)")
    print(f"fixed / adaptive forward passes:   {ratios['fixed_over_adaptive_steps']:.3f}x  "
          "(what adaptive stopping saves)")
    print(f"tokens per forward vs AR (1.0):    {ratios['tokens_per_forward_over_autoregressive']:.2f}x")
    print(f"4 concurrent, batched / one-by-one: {ratios['batched_over_sequential_throughput']:.2f}x throughput "
          f"({by['sequential'].seconds:.2f} s in {by['sequential'].batches} batches -> {by['batched'].seconds:.2f} s "
          f"in {by['batched'].batches})")


def report_full(rows: list[dict], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"size": "full", "rows": rows}, indent=2))
        return
    print(f"{'batch':>5} {'steps':>6} {'ms/step p50':>12} {'ms/canvas':>10} {'tok/s':>9}")
    for row in rows[:-1]:
        print(f"{row['batch']:>5} {row['steps']:>6} {row['step_ms_p50']:>12.1f} {row['canvas_ms_mean']:>10.1f} "
              f"{row['tokens_per_s']:>9.0f}")
    one, four = rows[0], rows[1]
    print(f"batch 4 / batch 1 throughput: {four['tokens_per_s'] / one['tokens_per_s']:.2f}x; "
          f"peak GPU memory {rows[-1]['peak_gb']:.1f} GB; seed `latency: {{canvas_ms: {one['canvas_ms_mean']:.0f}}}` "
          "(every step run: a real model stops earlier)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint directory or cached hub id (default: build the tiny model)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    parser.add_argument("--dtype", default="auto", help="auto, bfloat16, float16 or float32")
    parser.add_argument("--canvases", type=int, default=4, help="canvases per answer (max_new_tokens / canvas)")
    parser.add_argument("--max-denoising-steps", type=int, default=None, help="override the checkpoint's limit")
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode; the median is shown")
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help="how many of the built-in prompts")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--size", choices=("tiny", "full"), default="tiny",
                        help="full: the published architecture with random weights, on a CUDA GPU")
    args = parser.parse_args()
    args.prompts = PROMPTS[: max(1, args.prompts)]
    if args.size == "full":
        from benchmarks.engine_full import run_full

        rows = run_full(args.device)
        if rows is not None:
            report_full(rows, args.json)
        return
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
