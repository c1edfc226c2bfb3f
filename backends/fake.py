"""An in-package test double: scripted answers, delays and failures, with every call recorded.

For policy and router tests that do not need sockets. Integration tests use the simulated HTTP
server (backends/simulator) instead, through the real backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from backends.base import Backend, BackendSettings
from backends.errors import BackendError
from backends.types import Chunk, Completion, FinalChunk, Request, TextChunk, Timings, Usage, last_user_text

__all__ = ["FakeBackend", "FakeStep"]


@dataclass
class FakeStep:
    """One scripted call: either `text` (delivered after `delay_s`) or `error` (raised after it)."""

    text: str = ""
    delay_s: float = 0.0
    error: BackendError | None = None


@dataclass
class _Script:
    steps: list[FakeStep] = field(default_factory=list)
    responder: Callable[[Request], str] | None = None


class FakeBackend(Backend):
    kind = "fake"
    simulated = True

    def __init__(self, settings: BackendSettings, *, steps: list[FakeStep] | None = None,
                 responder: Callable[[Request], str] | None = None):
        super().__init__(settings)
        self._script = _Script(list(steps or []), responder)
        self.calls: list[Request] = []

    def _step(self, request: Request) -> FakeStep:
        if self._script.steps:
            return self._script.steps.pop(0)
        if self._script.responder is not None:
            return FakeStep(text=self._script.responder(request))
        return FakeStep(text=f"[fake {self.name}] {last_user_text(request.messages)[:40]}")

    async def stream(self, request: Request) -> AsyncGenerator[Chunk, None]:
        self.calls.append(request)
        step = self._step(request)
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.error is not None:
            raise step.error
        words = step.text.split(" ")
        for i, word in enumerate(words):
            yield TextChunk(word if i == 0 else " " + word)
        usage = Usage(input_tokens=sum(len(str(m.get("content", "")).split()) for m in request.messages),
                      output_tokens=len(words))
        yield FinalChunk(
            Completion(
                text=step.text,
                backend=self.name,
                model=self.model,
                finish_reason="stop",
                usage=usage,
                timings=Timings.measure(step.delay_s, step.delay_s, usage.output_tokens),
                cost_usd=self.settings.price.cost(usage),
                metadata={"simulated": True},
            )
        )
