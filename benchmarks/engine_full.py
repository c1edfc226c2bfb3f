"""`benchmarks/engine.py --size full`: the published DiffusionGemma architecture with random
weights (no download) on a GPU, timed per denoising step and per canvas at batch 1 and 4.

Random weights never become confident, so every canvas runs all `max_denoising_steps`: the
figures are the cost of one step and of one full-length canvas, the worst case a real model's
adaptive stop improves on. They seed the `latency: {canvas_ms: ...}` prior of a diffusion-local
backend on that GPU. Imported only for --size full.
"""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["run_full"]


class _StepClock:
    """A streamer that timestamps every denoising step and every committed canvas."""

    def __init__(self, torch: Any):
        self.torch = torch
        self.steps: list[float] = []
        self.canvases: list[float] = []
        self._seen_prompt = False

    def _now(self) -> float:
        if self.torch.cuda.is_available():
            self.torch.cuda.synchronize()  # kernels run asynchronously: wait for this step's
        return time.perf_counter()

    def put(self, _value: Any) -> None:
        if self._seen_prompt:
            self.canvases.append(self._now())
        else:
            self._seen_prompt = True
            self.start = self._now()

    def put_draft(self, value: Any = None, **_kwargs: Any) -> None:
        self.steps.append(self._now())

    def end(self) -> None:
        pass


def _measure(torch: Any, model: Any, batch: int, prompt_len: int, canvases: int, steps: int) -> dict[str, float]:
    canvas = model.config.canvas_length
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(10, min(1000, vocab), (batch, prompt_len), device=model.device)
    clock = _StepClock(torch)
    # confidence_threshold ~0: no adaptive stop, every canvas runs all `steps` (random weights would anyway).
    model.generate(ids, max_new_tokens=canvases * canvas, max_denoising_steps=steps, streamer=clock,
                   confidence_threshold=1e-12)
    marks = [clock.start, *clock.steps]
    step_s = sorted(b - a for a, b in zip(marks, marks[1:], strict=False))
    edges = [clock.start, *clock.canvases]
    canvas_s = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    return {"batch": batch, "steps": len(clock.steps), "step_ms_p50": 1000 * step_s[len(step_s) // 2],
            "canvas_ms_mean": 1000 * sum(canvas_s) / len(canvas_s),
            "tokens_per_s": batch * canvas * len(canvas_s) / sum(canvas_s)}


def run_full(device: str, canvases: int = 2, steps: int = 48, prompt_len: int = 512) -> list[dict[str, float]] | None:
    """Rows for batch 1 and 4, or None (after saying why) when there is no CUDA GPU."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        print(f"SKIPPED: --size full needs a CUDA GPU with about 60 GB free (--device cuda); torch "
              f"{torch.__version__} sees {'no GPU' if not torch.cuda.is_available() else 'one, but --device is ' + device}. "
              "Run it on a GPU machine; the tiny model's figures above are CPU-only.", file=sys.stderr)
        return None
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.diffusion.compat import patch_model
    from backends.diffusion.shapes import published_config

    started = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = DiffusionGemmaForBlockDiffusion(published_config()).eval()
    torch.set_default_dtype(torch.float32)
    patch_model(model)
    with torch.no_grad():  # an EOS logit of 0 never wins over 262k random ones: answers run full length
        model.lm_head.weight[model.generation_config.eos_token_id or 1].zero_()
    params = sum(p.numel() for p in model.parameters())
    print(f"built the published architecture ({params / 1e9:.1f} B parameters, random bfloat16 weights) on "
          f"{torch.cuda.get_device_name()} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    _measure(torch, model, 1, prompt_len, 1, 4)  # warm-up: kernels, allocator
    rows = []
    with torch.inference_mode():
        for batch in (1, 4):
            rows.append(_measure(torch, model, batch, prompt_len, canvases, steps))
            torch.cuda.empty_cache()
    rows.append({"peak_gb": torch.cuda.max_memory_allocated() / 1e9})
    return rows
