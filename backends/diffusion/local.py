"""`diffusion-local`: DiffusionGemma in this process, through transformers' own generation loop.

    backends:
      local:
        kind: diffusion-local
        model: /models/diffusiongemma-26B-A4B-it   # a directory, or a hub id already in the local cache
        decoding: diffusion
        options: {device: auto, dtype: auto}      # auto: GPU in bfloat16 if present, else CPU float32
        # options may also set max_batch (default 4, vLLM's max_num_seqs) and batch_window_ms (default 5)
        params: {max_denoising_steps: 48}         # defaults for every request

Per request, `Request.extra` (or the backend's `params`) may set any of max_new_tokens,
max_denoising_steps, entropy_bound, t_min, t_max, stability_threshold, confidence_threshold and
seed; `max_tokens` maps to max_new_tokens, and `temperature` T to the schedule T -> T/2 (the
published schedule is 0.8 -> 0.4). Unknown keys are a UsageError, so a typo fails early.

Streaming: committed canvases arrive as TextChunk; after every denoising step a DraftChunk
carries the current canvas's draft (the text that follows everything committed so far), for
display only (`complete()` skips decoding them). The model loads on first use, off the event
loop; requests queue for the one worker thread that owns it, and leaving a stream early (break,
task cancellation, deadline, a stop string) stops generation at the next denoising step.
Needs the `local` extra (torch, transformers>=5.23).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, ClassVar

from backends.base import Backend, BackendSettings, Health
from backends.capabilities import Capabilities
from backends.diffusion.engine import GENERATION_KEYS, DiffusionEngine, EngineJob, EngineResult
from backends.diffusion.load import EngineSetupError, load_model
from backends.diffusion.vision import checkpoint_has_vision, decode_image, request_images, template_content
from backends.errors import BackendError, BackendTimeout, RouteError, Unsupported, UsageError
from backends.gemma_tools import tool_call_chunks
from backends.thinking import split_chunks
from backends.types import (
    Chunk,
    Completion,
    DiffusionStats,
    DraftChunk,
    FinalChunk,
    Request,
    TextChunk,
    Timings,
    Usage,
)

__all__ = ["DiffusionLocalBackend", "EngineSetupError", "batch_window_s", "generation_overrides", "max_batch",
           "thinking_flag"]

log = logging.getLogger(__name__)

_NEAR_GREEDY = 0.02  # temperature 0 cannot divide logits; this is as close as the schedule allows


# Request extras that go to the chat template rather than to generation. `tool_choice` and
# `parallel_tool_calls` are accepted and left to the model: Gemma 4 has no switch for them.
_TEMPLATE_KEYS = ("thinking", "reasoning_effort", "tools", "tool_choice", "parallel_tool_calls")
# A client's own name for the request's max_tokens (chat's max_completion_tokens, which the
# server keeps as written): the limit arrives as `Request.max_tokens` already.
_SAME_AS_MAX_TOKENS = ("max_completion_tokens",)
# Client fields that ask nothing of the answer (who asks, how to bill or cache it): an engine in
# this process has nothing to do with them, so they are accepted and left alone.
_ADVISORY = frozenset({"user", "metadata", "store", "prompt_cache_key", "prompt_cache_retention", "service_tier",
                       "safety_identifier", "stream_options", "anthropic_beta", "context_management",
                       "output_config"})


# A configured generation setting rules the client's fields that mean the same.
_MEANT_BY = {"thinking": ("reasoning_effort",), "max_new_tokens": ("max_tokens",), "t_max": ("temperature",),
             "t_min": ("temperature",)}


def operator_request(request: Request, settings: BackendSettings) -> Request:
    """`request` without what the backend's params fix (backends/client_fields.py): the
    client's value of a configured setting, and of the fields that mean the same, is left out
    (`client_params` names the settings a client may change)."""
    _, fixed = settings.configured()
    ruled = {*fixed, *(alias for name in fixed for alias in _MEANT_BY.get(name, ()))}
    changes: dict[str, Any] = {name: None for name in ("max_tokens", "temperature")
                               if name in ruled and getattr(request, name) is not None}
    if not ruled.isdisjoint(request.extra):
        changes["extra"] = {k: v for k, v in request.extra.items() if k not in ruled}
    return request.with_options(**changes) if changes else request


def thinking_flag(request: Request, params: dict[str, Any]) -> bool | None:
    """Whether to think, passed to the chat template as `enable_thinking` (None leaves the
    template's default): the request's `thinking` (true/false, or an Anthropic client's
    `{"type": "enabled"}`), else its `reasoning_effort` ("none" is no), else the backend's params."""
    value = request.extra.get("thinking")
    if isinstance(value, dict):  # an Anthropic client's: adaptive lets the model think when it needs to
        return value.get("type") in ("enabled", "adaptive")
    effort = request.extra.get("reasoning_effort")
    if value is None and isinstance(effort, str):
        return effort != "none"
    if value is None:
        value = params.get("thinking")
    if value is None or isinstance(value, bool):
        return value
    raise UsageError(f"thinking must be true or false, got {value!r}")


def generation_overrides(request: Request, params: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """(generation settings, seed) from the backend's params, then the request's fields, then its
    extras (what the params fix is out of the request already: `operator_request`)."""
    configured, asked = _settings(params), _settings(request.extra)
    unknown = sorted({*configured, *asked} - {*GENERATION_KEYS, "seed"})
    if unknown:
        raise UsageError(f"diffusion-local does not understand {', '.join(map(repr, unknown))} (from the "
                         f"request's extra options or the backend's params); it accepts "
                         f"{', '.join(GENERATION_KEYS)}, seed, thinking and tools")
    seed = asked.get("seed", configured.get("seed"))
    values: dict[str, Any] = {}
    for source in (configured, _typed(request), asked):
        for key, value in source.items():
            if key == "seed":
                continue
            try:
                values[key] = GENERATION_KEYS[key](value)
            except (TypeError, ValueError):
                raise UsageError(f"{key} must be a {GENERATION_KEYS[key].__name__}, got {value!r}") from None
    if seed is not None:
        try:
            seed = int(seed)
        except (TypeError, ValueError):
            raise UsageError(f"seed must be an integer, got {seed!r}") from None
    return values, seed


def _settings(fields: dict[str, Any]) -> dict[str, Any]:
    """The generation settings among params or extras: chat-template inputs, the limit under a
    client's own name and fields that ask nothing of the answer left out."""
    skipped = {*_ADVISORY, *_TEMPLATE_KEYS, *_SAME_AS_MAX_TOKENS}
    return {k: v for k, v in fields.items() if k not in skipped}


def _typed(request: Request) -> dict[str, Any]:
    """The request's max_tokens and temperature as generation settings."""
    values: dict[str, Any] = {}
    if request.max_tokens is not None:
        values["max_new_tokens"] = request.max_tokens
    if request.temperature is not None:
        t_max = max(request.temperature, _NEAR_GREEDY)
        values.update(t_max=t_max, t_min=t_max / 2)
    return values


def _chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Chat templates expect plain string content; OpenAI content parts are flattened to text, except
    # in a message with images, whose parts stay parts for the template to place. Other keys (an
    # assistant's tool_calls, a tool reply's tool_call_id) are the template's to render.
    return [{**m, "role": m.get("role", "user"), "content": template_content(m.get("content"))} for m in messages]


def _with_images(engine: DiffusionEngine, input_ids: Any, urls: list[str]) -> tuple[Any, Any]:
    return engine.add_images(input_ids, [decode_image(url) for url in urls])


def max_batch(options: dict[str, Any]) -> int:
    """`options.max_batch`: concurrent requests generated together (vLLM's `--max-num-seqs`; its
    DiffusionGemma recipe uses 4, since every row holds canvas x vocabulary logits)."""
    value = options.get("max_batch", 4)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EngineSetupError(f"options.max_batch must be a positive integer (vLLM's recipe uses 4), got {value!r}")
    return value


def batch_window_s(options: dict[str, Any]) -> float:
    """`options.batch_window_ms` (default 5): how long a batch with room waits for concurrent
    requests to arrive; small next to a canvas (about 250 ms on one GPU)."""
    value = options.get("batch_window_ms", 5)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise EngineSetupError(f"options.batch_window_ms must be a number of milliseconds >= 0, got {value!r}")
    return float(value) / 1000


class DiffusionLocalBackend(Backend):
    kind = "diffusion-local"
    # vision: only with a checkpoint that has a vision tower and an image processor; see current_capabilities.
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, seed=True, vision=True, drafts=True)

    def __init__(self, settings: BackendSettings):
        super().__init__(settings)
        self._engine: DiffusionEngine | None = None
        self._load_lock = threading.Lock()
        self._vision: bool | None = None  # what the checkpoint's files promise, read once

    def current_capabilities(self) -> Capabilities:
        """Images only when this checkpoint takes them: once loaded, when its image processor loaded;
        before that (the router decides before the weights load), when its files declare a vision
        tower and an image processor (config files only). Without either, image requests go elsewhere."""
        if self._engine is not None:
            vision = self._engine.takes_images
        else:
            if self._vision is None:
                self._vision = checkpoint_has_vision(self.model)
            vision = self._vision
        return dataclasses.replace(self.capabilities, vision=vision)

    # -- engine ---------------------------------------------------------------------------

    def load(self) -> DiffusionEngine:
        """Load the model now (blocking) instead of on the first request. Idempotent."""
        with self._load_lock:
            if self._engine is None:
                try:
                    max_batch(self.settings.options)  # refuse bad settings before loading gigabytes
                    batch_window_s(self.settings.options)
                    loaded = load_model(self.model, self.settings.options)
                except EngineSetupError as exc:
                    raise _located(exc, self) from None
                if loaded.canvas_length != self.settings.canvas_length:
                    # Latency priors and cost estimates use the configured figure; say when it is off.
                    log.warning("%s: the checkpoint writes %d-token canvases but the backend's canvas_length is "
                                "%d; set canvas_length: %d in its config", self.name, loaded.canvas_length,
                                self.settings.canvas_length, loaded.canvas_length)
                options = self.settings.options
                self._engine = DiffusionEngine(loaded, max_batch=max_batch(options),
                                               batch_window_s=batch_window_s(options))
            return self._engine

    @property
    def stats(self) -> dict[str, int] | None:
        """The engine's counters (done, cancelled, failed, denoising_steps), or None before it loads."""
        return None if self._engine is None else dict(self._engine.stats)

    def queue_state(self) -> dict[str, int] | None:
        """Requests waiting and being generated now, and the batch limit; None before the model loads."""
        if self._engine is None:
            return None
        state = self._engine.queue_state()
        return {"waiting": state.ahead, "running": state.running, "max_batch": state.max_batch}

    async def engine(self) -> DiffusionEngine:
        if self._engine is not None:
            return self._engine
        return await asyncio.to_thread(self.load)

    def _deadline_s(self, request: Request) -> float | None:
        limits = [t for t in (request.timeout_s, self.settings.timeout_s) if t is not None]
        return min(limits) if limits else None

    # -- the interface --------------------------------------------------------------------

    async def complete(self, request: Request) -> Completion:
        # Nobody sees drafts here: skip decoding one per denoising step.
        async with contextlib.aclosing(self._answer(request, drafts=False)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    return chunk.completion
        raise BackendError("generation ended without a result", **self.where())  # pragma: no cover

    def stream(self, request: Request) -> AsyncGenerator[Chunk, None]:
        return self._answer(request, drafts=True)

    def _answer(self, request: Request, *, drafts: bool) -> AsyncGenerator[Chunk, None]:
        """The engine's text with thinking split out, then Gemma 4 tool calls parsed out."""
        return tool_call_chunks(split_chunks(self._generate(request, drafts=drafts)))

    async def _generate(self, request: Request, *, drafts: bool) -> AsyncIterator[Chunk]:
        request = operator_request(request, self.settings)
        overrides, seed = generation_overrides(request, self.settings.params)
        engine = await self.engine()
        config = engine.generation_config(overrides)
        input_ids = engine.encode(_chat(request.messages), thinking=thinking_flag(request, self.settings.params),
                                  tools=request.extra.get("tools"))
        images = None
        urls = request_images(request.messages)
        if urls:
            if not engine.takes_images:
                raise Unsupported(f"{self.name}: the checkpoint at {self.model} has no vision tower or no image "
                                  "processor, so it cannot take images; send the request to a backend that can",
                                  need="vision")
            # Decoding and resizing images takes milliseconds to seconds: off the event loop.
            input_ids, images = await asyncio.to_thread(_with_images, engine, input_ids, urls)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()

        def emit(event) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, event)
            except RuntimeError:  # the caller's loop is gone: nobody is listening any more
                job.cancel("the caller went away")

        budget = self._deadline_s(request)
        started = time.perf_counter()
        job = EngineJob(input_ids=input_ids, generation_config=config, emit=emit, seed=seed, drafts=drafts, images=images,
                        deadline=None if budget is None else time.monotonic() + budget)
        engine.submit(job)
        run = _Run(self, engine, config, request.stop or [], started, budget)
        try:
            async for chunk in run.chunks(events, job):
                yield chunk
        finally:
            # Reached on success, error, consumer break (aclose) and task cancellation alike.
            job.cancel()

    async def check(self, timeout_s: float = 5.0) -> Health:
        """torch and transformers present, and a DiffusionGemma config at the path (config.json
        only: the weights load on first use)."""
        from importlib.util import find_spec

        missing = [m for m in ("torch", "transformers") if find_spec(m) is None]
        if missing:
            return Health(False, f"needs {' and '.join(missing)}: pip install torch==2.13.0 (the CPU build; a bare "
                                 "`torch` pulls a CUDA build), then pip install 'latency-router[local]'")
        from backends.diffusion.load import read_config

        try:
            config = read_config(self.model)
        except EngineSetupError as exc:
            return Health(False, str(exc))
        return Health(True, f"DiffusionGemma checkpoint at {self.model} (canvas {config.canvas_length}; "
                            "weights load on first use)")

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.to_thread(engine.close)



class _Run:
    """Turns one job's engine events into chunks, enforcing stop strings and the deadline."""

    def __init__(self, backend: DiffusionLocalBackend, engine: DiffusionEngine, config: Any, stop: list[str],
                 started: float, budget: float | None):
        self.backend = backend
        self.engine = engine
        self.config = config
        self.stop = stop
        self.started = started
        self.budget = budget
        self.committed = ""
        self.ttft: float | None = None
        self.first_draft: float | None = None
        self.queue: dict[str, Any] = {}  # where the request stood on submit, and how long it waited

    async def _next(self, events: asyncio.Queue):
        if self.budget is None:
            return await events.get()
        remaining = self.budget - (time.perf_counter() - self.started)
        try:
            async with asyncio.timeout(max(remaining, 0.0) + 0.5):  # the worker checks first; this is a backstop
                return await events.get()
        except TimeoutError:
            raise BackendTimeout(f"no answer within {self.budget:g} s", **self.backend.where()) from None

    async def chunks(self, events: asyncio.Queue, job: EngineJob) -> AsyncIterator[Chunk]:
        while True:
            kind, payload = await self._next(events)
            if kind == "queued":
                self.queue.update(ahead=payload.ahead, running=payload.running, max_batch=payload.max_batch)
            elif kind == "started":
                self.queue["wait_s"] = payload
            elif kind == "draft":
                if self.first_draft is None:
                    self.first_draft = time.perf_counter() - self.started
                yield DraftChunk(payload.text, step=payload.step, canvas=payload.canvas)
            elif kind == "text":
                piece, stopped = self._cut_at_stop(payload)
                if piece:
                    self.ttft = self.ttft if self.ttft is not None else time.perf_counter() - self.started
                    self.committed += piece
                    yield TextChunk(piece)
                if stopped:
                    job.cancel("stop string")
            else:
                yield self._end(kind, payload)
                return

    def _end(self, kind: str, payload: Any) -> FinalChunk:
        """The FinalChunk for a terminal event, or the error it stands for."""
        if kind == "done":
            return FinalChunk(self._completion(payload, payload.text, payload.finish_reason))
        if kind != "cancelled":
            raise _located(payload, self.backend)
        if payload.reason == "stop string":
            return FinalChunk(self._completion(payload, self.committed, "stop"))
        if payload.reason == "deadline":
            raise BackendTimeout(f"no answer within {self.budget:g} s (stopped after {payload.canvases} canvases, "
                                 f"{payload.denoising_steps} denoising steps)", **self.backend.where())
        raise BackendError(f"generation was {payload.reason}", **self.backend.where())

    def _cut_at_stop(self, piece: str) -> tuple[str, bool]:
        if not self.stop:
            return piece, False
        text = self.committed + piece
        hits = [text.find(s) for s in self.stop if s and s in text]
        if not hits:
            return piece, False
        return text[: min(hits)][len(self.committed):], True

    def _completion(self, result: EngineResult, text: str, finish_reason: str | None) -> Completion:
        backend, loaded = self.backend, self.engine.loaded
        total = time.perf_counter() - self.started
        output_tokens = result.output_tokens or len(loaded.tokenizer.encode(text, add_special_tokens=False))
        usage = Usage(input_tokens=result.prompt_tokens, output_tokens=output_tokens)
        metadata: dict[str, Any] = {
            "device": loaded.device,
            "dtype": loaded.dtype,
            "generation": self.engine.effective(self.config),
            "canvas_s": result.canvas_s,
            "first_draft_s": self.first_draft,
            "queue": self.queue,
            "batch_size": result.batch_size,
        }
        if result.tokens_per_forward is not None:
            metadata["tokens_per_forward"] = result.tokens_per_forward
        return Completion(
            text=text,
            backend=backend.name,
            model=backend.model,
            finish_reason=finish_reason,
            usage=usage,
            timings=Timings.measure(self.ttft, total, usage.output_tokens, diffusion=True),
            cost_usd=backend.settings.price.cost(usage),
            diffusion=DiffusionStats(canvases=max(result.canvases, 1), denoising_steps=result.denoising_steps or None,
                                     canvas_length=loaded.canvas_length),
            metadata=metadata,
        )


def _located(error: Any, backend: DiffusionLocalBackend) -> RouteError:
    if isinstance(error, BackendError) and not error.backend:
        error.backend, error.model = backend.name, backend.model
        error.args = (f"{backend.name}: {error.args[0]}",)
    return error if isinstance(error, RouteError) else BackendError(str(error), **backend.where())
