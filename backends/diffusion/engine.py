"""The worker that owns one DiffusionGemma model and runs transformers' own generation loop.

One thread, one queue: requests are served one at a time, in arrival order, so a model's memory
is never shared between two generations. Each job reports events back through a thread-safe
callback: ("draft", DraftEvent) after every denoising step (via `TextDiffusionStreamer.put_draft`),
("text", str) for committed text, then exactly one terminal event: ("done", EngineResult),
("cancelled", EngineResult) or ("error", RouteError).

Cancellation and deadlines are checked by the streamer, which transformers calls after every
denoising step: raising there is the one way to stop `generate()` between steps.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backends.diffusion.load import EngineSetupError, LoadedModel, oom_message
from backends.errors import BackendUnavailable, RouteError, UsageError

__all__ = ["DiffusionEngine", "DraftEvent", "EngineJob", "EngineResult", "GENERATION_KEYS"]

# The DiffusionGemma generation settings a request may override (Request.extra / backend params).
GENERATION_KEYS: dict[str, type] = {
    "max_new_tokens": int,
    "max_denoising_steps": int,
    "entropy_bound": float,
    "t_min": float,
    "t_max": float,
    "stability_threshold": int,
    "confidence_threshold": float,
}

Event = tuple[str, Any]


@dataclass(frozen=True)
class DraftEvent:
    """The argmax of one denoising step for the canvas being written (committed text excluded)."""

    text: str
    step: int  # 1-based, within this canvas
    canvas: int  # 0-based


@dataclass
class EngineResult:
    """What one generation did. Partial (so far) when the job was cancelled."""

    text: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    canvases: int = 0
    denoising_steps: int = 0  # decoder forward passes: one per put_draft at batch size 1
    tokens_per_forward: float | None = None  # transformers' figure: real tokens (no pad) per pass
    finish_reason: str | None = None
    canvas_s: list[float] = field(default_factory=list)  # wall seconds per committed canvas
    reason: str = ""  # why it was cancelled


@dataclass
class EngineJob:
    """One request waiting for (or inside) the worker."""

    input_ids: Any  # LongTensor (1, prompt_len), on the CPU
    generation_config: Any  # a validated DiffusionGemmaGenerationConfig
    emit: Callable[[Event], None]
    seed: int | None = None
    deadline: float | None = None  # time.monotonic() value
    drafts: bool = True  # False: count denoising steps but skip decoding and sending drafts
    cancelled: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = "cancelled by the caller"

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()


class _Stop(Exception):
    """Raised from the streamer to leave transformers' generation loop between steps."""


def _streamer_class():
    from transformers import TextDiffusionStreamer

    class EngineStreamer(TextDiffusionStreamer):
        """TextDiffusionStreamer that hands drafts and committed text to a job instead of printing."""

        def __init__(self, tokenizer, job: EngineJob, eos_ids: set[int]):
            super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=True)
            self.job = job
            self.eos_ids = eos_ids
            self.canvases = 0
            self.steps = 0
            self.canvas_steps = 0
            self.canvas_s: list[float] = []
            self._canvas_started = time.perf_counter()

        def check(self) -> None:
            if self.job.cancelled.is_set():
                raise _Stop(self.job.cancel_reason)
            if self.job.deadline is not None and time.monotonic() > self.job.deadline:
                self.job.cancel("deadline")
                raise _Stop("deadline")

        def put_draft(self, value, **kwargs) -> None:
            self.steps += 1
            self.canvas_steps += 1
            if not self.job.drafts:
                self.check()
                return
            ids = value[0].tolist() if len(value.shape) > 1 else value.tolist()
            cut = next((i for i, t in enumerate(ids) if t in self.eos_ids), len(ids))
            text = self.tokenizer.decode(ids[:cut], **self.decode_kwargs)
            self.job.emit(("draft", DraftEvent(text, self.canvas_steps, self.canvases)))
            self.check()

        def put(self, value) -> None:
            if not self.next_tokens_are_prompt:
                now = time.perf_counter()
                self.canvas_s.append(now - self._canvas_started)
                self._canvas_started = now
                self.canvases += 1
                self.canvas_steps = 0
            else:
                self._canvas_started = time.perf_counter()
            super().put(value)
            self.check()

        def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
            if text:
                self.job.emit(("text", text))

    return EngineStreamer


class DiffusionEngine:
    """Owns one loaded model; `submit()` queues a job, a single worker thread runs them in order."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self._jobs: queue.Queue[EngineJob | None] = queue.Queue()
        self._streamer_cls = _streamer_class()
        # Counters since start (read by /healthz, benchmarks and tests); written by the worker only.
        self.stats = {"done": 0, "cancelled": 0, "failed": 0, "denoising_steps": 0}
        self._thread = threading.Thread(target=self._run, name="diffusion-engine", daemon=True)
        self._thread.start()

    # -- request side (any thread) --------------------------------------------------------

    def encode(self, messages: list[dict[str, Any]]) -> Any:
        """Token ids (1, n) for chat messages, through the checkpoint's own chat template."""
        try:
            encoded = self.loaded.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        except Exception as exc:  # jinja raises its own errors, e.g. for roles a template forbids
            raise UsageError(f"the checkpoint's chat template rejected these messages: {exc}") from None
        return encoded["input_ids"]

    def generation_config(self, overrides: dict[str, Any]) -> Any:
        """The model's generation config with `overrides` applied, validated by transformers."""
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

        config = copy.deepcopy(self.loaded.model.generation_config)
        values = dict(overrides)
        try:
            if "entropy_bound" in values:
                values["sampler_config"] = EntropyBoundSamplerConfig(entropy_bound=values.pop("entropy_bound"))
            config.update(**values)
            config.validate()
            # A one-sided temperature override is checked against the other side here, not mid-request.
            defaults = config._get_default_generation_params()
            t_min = config.t_min if config.t_min is not None else defaults["t_min"]
            t_max = config.t_max if config.t_max is not None else defaults["t_max"]
            if t_max <= t_min:
                raise ValueError(f"t_max ({t_max}) must be greater than t_min ({t_min})")
        except ValueError as exc:
            raise UsageError(f"invalid DiffusionGemma generation setting: {exc}. Settable per request: "
                             f"{', '.join(GENERATION_KEYS)}, seed.") from None
        return config

    @staticmethod
    def effective(config: Any) -> dict[str, Any]:
        """The settings generation will actually use (unset ones take transformers' defaults)."""
        defaults = config._get_default_generation_params()
        values = {key: getattr(config, key, None) for key in
                  ("max_new_tokens", "max_denoising_steps", "t_min", "t_max", "stability_threshold",
                   "confidence_threshold")}
        values = {k: (defaults[k] if v is None else v) for k, v in values.items()}
        sampler = config.sampler_config or defaults["sampler_config"]
        values["entropy_bound"] = sampler.entropy_bound
        return values

    def submit(self, job: EngineJob) -> EngineJob:
        self._jobs.put(job)
        return job

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker after the current job. Safe to call twice."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout_s)

    # -- worker side ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job.cancelled.is_set():
                self.stats["cancelled"] += 1
                job.emit(("cancelled", EngineResult(reason=job.cancel_reason)))
                continue
            try:
                kind, payload = self._generate(job)
            except Exception as exc:  # the worker must survive anything one request does
                kind, payload = "error", BackendUnavailable(f"the DiffusionGemma engine failed: "
                                                            f"{type(exc).__name__}: {exc}")
            self.stats["failed" if kind == "error" else kind] += 1
            if isinstance(payload, EngineResult):
                self.stats["denoising_steps"] += payload.denoising_steps
            job.emit((kind, payload))

    def _generate(self, job: EngineJob) -> Event:
        import torch

        loaded = self.loaded
        eos_ids = _eos_ids(job.generation_config)
        streamer = self._streamer_cls(loaded.tokenizer, job, eos_ids)
        prompt_len = job.input_ids.shape[1]
        if job.seed is not None:
            torch.manual_seed(job.seed)
        try:
            streamer.check()  # the deadline may have passed while the job waited in the queue
            output = loaded.model.generate(
                job.input_ids.to(loaded.model.device), streamer=streamer, generation_config=job.generation_config
            )
        except _Stop as stop:
            return "cancelled", self._partial(streamer, prompt_len, str(stop))
        except torch.OutOfMemoryError:
            return "error", EngineSetupError(oom_message("generating", loaded.device, loaded.dtype))
        except RouteError as exc:
            return "error", exc
        output.cache = None  # the KV cache is large and not reused between requests
        return "done", self._result(output, job, streamer, prompt_len, eos_ids)

    def _result(self, output: Any, job: EngineJob, streamer: Any, prompt_len: int, eos_ids: set[int]) -> EngineResult:
        new_ids = output.sequences[0, prompt_len:].tolist()
        pad = job.generation_config.pad_token_id
        real = [t for t in new_ids if t != pad]
        per_forward = output.tokens_per_forward
        return EngineResult(
            text=self.loaded.tokenizer.decode(new_ids, skip_special_tokens=True),
            prompt_tokens=prompt_len,
            output_tokens=len([t for t in real if t not in eos_ids]),
            canvases=streamer.canvases,
            denoising_steps=streamer.steps,
            tokens_per_forward=None if per_forward is None else float(per_forward[0]),
            finish_reason="stop" if any(t in eos_ids for t in real) else "length",
            canvas_s=list(streamer.canvas_s),
        )

    @staticmethod
    def _partial(streamer: Any, prompt_len: int, reason: str) -> EngineResult:
        return EngineResult(prompt_tokens=prompt_len, canvases=streamer.canvases, denoising_steps=streamer.steps,
                            canvas_s=list(streamer.canvas_s), reason=reason)


def _eos_ids(config: Any) -> set[int]:
    eos = config.eos_token_id
    if eos is None:
        return set()
    return set(eos) if isinstance(eos, list) else {eos}
