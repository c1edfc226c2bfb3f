"""The worker that owns one DiffusionGemma model and runs transformers' own generation loop.

One thread owns the model. Requests queue in arrival order; when the worker is free it takes the
oldest job and, up to `max_batch` (vLLM's `max_num_seqs`), later jobs with the same generation
settings, and runs them as one batched `generate()` (prompts left-padded, one canvas per row per
step). A job with a seed runs alone: torch's seed is global to the batch.
Each job reports events back through a thread-safe callback: ("queued", QueueEvent) on submit,
("started", seconds waited) when its batch starts, ("draft", DraftEvent) after every denoising
step, ("text", str) for committed text, then exactly one terminal event: ("done", EngineResult),
("cancelled", EngineResult) or ("error", RouteError).

Cancellation and deadlines are checked by the streamer, which transformers calls after every
denoising step: a cancelled row stops receiving events at once and the batch stops when no row
is left listening.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.diffusion.load import EngineSetupError, LoadedModel, oom_message
from backends.diffusion.streamer import BatchStreamer, DraftEvent, Row, StopGeneration
from backends.diffusion.vision import ImageInputs, expand
from backends.errors import BackendUnavailable, RouteError, UsageError

__all__ = ["GENERATION_KEYS", "DiffusionEngine", "DraftEvent", "EngineJob", "EngineResult", "QueueEvent"]

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
class QueueEvent:
    """Where a job stood when it was submitted: jobs waiting ahead of it and jobs being generated."""

    ahead: int
    running: int
    max_batch: int


@dataclass
class EngineResult:
    """What one generation did. Partial (so far) when the job was cancelled."""

    text: str = ""
    prompt_tokens: int = 0
    output_tokens: int = 0
    canvases: int = 0
    denoising_steps: int = 0  # decoder forward passes this request took part in
    tokens_per_forward: float | None = None  # transformers' figure: real tokens (no pad) per pass
    finish_reason: str | None = None
    canvas_s: list[float] = field(default_factory=list)  # wall seconds per committed canvas
    reason: str = ""  # why it was cancelled
    batch_size: int = 1  # requests generated together with this one (itself included)
    queue_s: float = 0.0  # seconds between submit and the start of its batch


@dataclass
class EngineJob:
    """One request waiting for (or inside) the worker."""

    input_ids: Any  # LongTensor (1, prompt_len), on the CPU
    generation_config: Any  # a validated DiffusionGemmaGenerationConfig
    emit: Callable[[Event], None]
    images: ImageInputs | None = None  # pixels and image-token marks, when the prompt holds images
    seed: int | None = None
    deadline: float | None = None  # time.monotonic() value
    drafts: bool = True  # False: count denoising steps but skip decoding and sending drafts
    cancelled: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = "cancelled by the caller"
    submitted: float = 0.0  # time.monotonic() at submit

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()

    @property
    def batch_key(self) -> str | None:
        """Jobs with equal keys may share a batch; None: this job runs alone."""
        if self.seed is not None:
            return None
        return json.dumps(self.generation_config.to_dict(), sort_keys=True, default=str)


class _JobQueue:
    """FIFO of jobs; `take()` hands the worker the oldest job plus compatible later ones."""

    def __init__(self) -> None:
        self._items: deque[EngineJob | None] = deque()
        self._ready = threading.Condition()
        self._running: set[int] = set()  # ids of taken jobs not yet finished

    def put(self, jobs: Sequence[EngineJob | None]) -> tuple[int, int]:
        """Append atomically; returns (waiting, running) as they were before these jobs."""
        with self._ready:
            before = (len(self._items), len(self._running))
            self._items.extend(jobs)
            self._ready.notify()
            return before

    def state(self) -> tuple[int, int]:
        """(waiting, running), one consistent snapshot."""
        with self._ready:
            return len(self._items), len(self._running)

    def is_running(self, job: EngineJob) -> bool:
        with self._ready:
            return id(job) in self._running

    def finished(self, job: EngineJob) -> None:
        with self._ready:
            self._running.discard(id(job))

    def take(self, limit_of: Callable[[], int], window_s: float = 0.0) -> list[EngineJob] | None:
        """The next batch (blocking), or None when the engine is closing. With room left in the
        batch, waits up to `window_s` for compatible jobs: requests sent together arrive a few
        milliseconds apart (each is tokenized first), and a batch cannot be joined once running."""
        with self._ready:
            while not self._items:
                self._ready.wait()
            first = self._items.popleft()
            if first is None:
                return None
            batch, key, limit = [first], first.batch_key, limit_of()  # read now: it may change while idle
            self._running.add(id(first))  # counted as running from the moment it leaves the line
            until = time.monotonic() + window_s
            while key is not None:
                self._gather(batch, key, limit)
                left = until - time.monotonic()
                if len(batch) >= limit or left <= 0:
                    break
                self._ready.wait(left)
            return batch

    def _gather(self, batch: list[EngineJob], key: str, limit: int) -> None:
        for job in list(self._items):
            if len(batch) >= limit:
                return
            if job is not None and not job.cancelled.is_set() and job.batch_key == key:
                self._items.remove(job)
                batch.append(job)
                self._running.add(id(job))


class DiffusionEngine:
    """Owns one loaded model; `submit()` queues a job, a single worker thread runs them in batches."""

    def __init__(self, loaded: LoadedModel, *, max_batch: int = 1, batch_window_s: float = 0.0):
        self.loaded = loaded
        self.max_batch = max(1, int(max_batch))
        self.batch_window_s = batch_window_s  # how long a batch with room waits for company
        self._jobs = _JobQueue()
        self._hidden = _hidden_ids(loaded.tokenizer)
        # Counters since start (read by /healthz, benchmarks and tests); written by the worker only.
        self.stats = {"done": 0, "cancelled": 0, "failed": 0, "denoising_steps": 0, "batches": 0,
                      "largest_batch": 0}
        self._thread = threading.Thread(target=self._run, name="diffusion-engine", daemon=True)
        self._thread.start()

    # -- request side (any thread) --------------------------------------------------------

    def encode(self, messages: list[dict[str, Any]], *, thinking: bool | None = None,
               tools: list[dict[str, Any]] | None = None) -> Any:
        """Token ids (1, n) for chat messages, through the checkpoint's own chat template.
        `thinking` becomes the template's `enable_thinking` (Gemma 4's switch; None: its default);
        `tools` (OpenAI function definitions) are rendered by the template as Gemma 4 declares them."""
        extra: dict[str, Any] = {} if thinking is None else {"enable_thinking": thinking}
        if tools:
            extra["tools"] = tools
        try:
            encoded = self.loaded.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True, **extra
            )
        except Exception as exc:  # jinja raises its own errors, e.g. for roles a template forbids
            raise UsageError(f"the checkpoint's chat template rejected these messages: {exc}") from None
        return encoded["input_ids"]

    @property
    def takes_images(self) -> bool:
        return self.loaded.image_processor is not None

    def add_images(self, input_ids: Any, images: list[Any]) -> tuple[Any, ImageInputs]:
        """(input_ids with each image's tokens in place, the image inputs) for decoded images, through
        the checkpoint's image processor. Blocking (resizing): call it off the event loop."""
        return expand(input_ids, images, self.loaded.image_processor, self.loaded.model.config)

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

    def queue_state(self) -> QueueEvent:
        """Jobs waiting and jobs being generated now (a snapshot; the worker moves on)."""
        waiting, running = self._jobs.state()
        return QueueEvent(ahead=waiting, running=running, max_batch=self.max_batch)

    def submit(self, job: EngineJob) -> EngineJob:
        self.submit_all([job])
        return job

    def submit_all(self, jobs: Sequence[EngineJob]) -> None:
        """Queue `jobs` together: none of them is taken before the last is queued."""
        now = time.monotonic()
        for job in jobs:
            job.submitted = now
        before, running = self._jobs.put(jobs)
        for offset, job in enumerate(jobs):
            job.emit(("queued", QueueEvent(ahead=before + offset, running=running, max_batch=self.max_batch)))

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker after the current batch. Safe to call twice."""
        if self._thread.is_alive():
            self._jobs.put([None])
            self._thread.join(timeout_s)

    # -- worker side ----------------------------------------------------------------------

    def _run(self) -> None:
        while (batch := self._jobs.take(lambda: self.max_batch, self.batch_window_s)) is not None:
            live = [job for job in batch if not self._skip_cancelled(job)]
            if not live:
                continue
            try:
                self._generate(live)
            except Exception as exc:  # the worker must survive anything one request does
                error = BackendUnavailable(f"the DiffusionGemma engine failed: {type(exc).__name__}: {exc}")
                for job in live:
                    if self._jobs.is_running(job):  # not already told (done or cancelled)
                        self._finish(job, "error", error)

    def _skip_cancelled(self, job: EngineJob) -> bool:
        if job.cancelled.is_set():
            self._finish(job, "cancelled", EngineResult(reason=job.cancel_reason))
            return True
        return False

    def _finish(self, job: EngineJob, kind: str, payload: Any) -> None:
        """Send the job's one terminal event; it no longer counts as running."""
        self._jobs.finished(job)
        self.stats["failed" if kind == "error" else kind] += 1
        job.emit((kind, payload))

    def _generate(self, jobs: list[EngineJob]) -> None:
        import torch

        loaded, config = self.loaded, jobs[0].generation_config
        eos_ids = _eos_ids(config)
        started = time.monotonic()
        for job in jobs:
            job.emit(("started", started - job.submitted))
        input_ids, attention_mask = _left_pad([job.input_ids for job in jobs], config.pad_token_id)
        prompt_len = input_ids.shape[1]
        streamer = BatchStreamer(loaded.tokenizer, jobs, eos_ids, self._hidden,
                                 on_drop=lambda row: self._dropped(row, prompt_len, streamer, started))
        self.stats["batches"] += 1
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(jobs))
        if jobs[0].seed is not None:
            torch.manual_seed(jobs[0].seed)
        try:
            streamer.check()  # a deadline may have passed while the jobs waited in the queue
            output = loaded.model.generate(input_ids.to(loaded.model.device),
                                           attention_mask=attention_mask.to(loaded.model.device),
                                           streamer=streamer, generation_config=config,
                                           **_image_kwargs(jobs, input_ids.shape[1], loaded.model))
        except StopGeneration:
            return  # every row was dropped, and told so, by the streamer
        except torch.OutOfMemoryError:
            self._fail(streamer, EngineSetupError(oom_message("generating", loaded.device, loaded.dtype)))
            return
        except RouteError as exc:
            self._fail(streamer, exc)
            return
        finally:
            self.stats["denoising_steps"] += max((row.steps for row in streamer.rows), default=0)
        output.cache = None  # the KV cache is large and not reused between requests
        for index, row in enumerate(streamer.rows):
            if not row.dropped:
                self._finish(row.job, "done", self._result(output, index, row, streamer, prompt_len, started))

    def _fail(self, streamer: BatchStreamer, error: RouteError) -> None:
        for row in streamer.live():
            self._finish(row.job, "error", error)

    def _dropped(self, row: Row, prompt_len: int, streamer: BatchStreamer, started: float) -> None:
        result = EngineResult(prompt_tokens=_prompt_len(row.job), canvases=row.canvases, denoising_steps=row.steps,
                              canvas_s=list(streamer.canvas_s), reason=row.dropped,
                              batch_size=len(streamer.rows), queue_s=started - row.job.submitted)
        self._finish(row.job, "cancelled", result)

    def _result(self, output: Any, index: int, row: Row, streamer: BatchStreamer, prompt_len: int,
                started: float) -> EngineResult:
        eos_ids = streamer.eos_ids
        new_ids = output.sequences[index, prompt_len:].tolist()
        pad = row.job.generation_config.pad_token_id
        real = [t for t in new_ids if t != pad]
        per_forward = output.tokens_per_forward
        return EngineResult(
            text=row.text,
            prompt_tokens=_prompt_len(row.job),
            output_tokens=len([t for t in real if t not in eos_ids]),
            canvases=row.canvases,
            denoising_steps=row.steps,
            tokens_per_forward=None if per_forward is None else float(per_forward[index]),
            finish_reason="stop" if any(t in eos_ids for t in real) else "length",
            canvas_s=list(streamer.canvas_s[: row.canvases]),
            batch_size=len(streamer.rows),
            queue_s=started - row.job.submitted,
        )


def _prompt_len(job: EngineJob) -> int:
    return int(job.input_ids.shape[1])


def _left_pad(prompts: list[Any], pad_id: int | None) -> tuple[Any, Any]:
    """One (batch, longest) tensor of prompts padded on the left, and its attention mask.
    Left: every row's canvas then starts right after its own prompt."""
    import torch

    longest = max(int(p.shape[1]) for p in prompts)
    ids = torch.full((len(prompts), longest), pad_id or 0, dtype=prompts[0].dtype)
    mask = torch.zeros((len(prompts), longest), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        n = int(prompt.shape[1])
        ids[i, longest - n:] = prompt[0]
        mask[i, longest - n:] = 1
    return ids, mask


def _image_kwargs(jobs: list[EngineJob], width: int, model: Any) -> dict[str, Any]:
    """`generate()`'s image inputs for a batch: every row's images in row order (the model fills
    image tokens in that order), and the image-token marks left-padded like the prompts."""
    import torch

    with_images = [job.images for job in jobs if job.images is not None]
    if not with_images:
        return {}
    marks = torch.zeros((len(jobs), width), dtype=torch.long)
    for i, job in enumerate(jobs):
        if job.images is not None:
            row = job.images.mm_token_type_ids[0]
            marks[i, width - row.shape[0]:] = row
    return {
        "pixel_values": torch.cat([x.pixel_values for x in with_images]).to(model.device, model.dtype),
        "image_position_ids": torch.cat([x.image_position_ids for x in with_images]).to(model.device),
        "mm_token_type_ids": marks.to(model.device),
    }


def _hidden_ids(tokenizer: Any) -> frozenset[int]:
    """Special tokens to drop from answers: all but the thinking and tool-call delimiters."""
    from backends.thinking import KEPT_MARKERS

    kept = {tokenizer.convert_tokens_to_ids(m) for m in KEPT_MARKERS if m in tokenizer.get_vocab()}
    return frozenset(set(tokenizer.all_special_ids) - kept)


def _eos_ids(config: Any) -> set[int]:
    eos = config.eos_token_id
    if eos is None:
        return set()
    return set(eos) if isinstance(eos, list) else {eos}
