"""One round's fan-out: every member sample concurrently, each through the router's call path
(its timeout, retries, budget and concurrency limits), until the quorum is met; the rest get a
grace period, then are cancelled and awaited (no task outlives the round). A member still needed
when the deadline passes is recorded as failed (out of time): the answer is degraded."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, BackendError
from backends.types import FinalChunk, Message, Request, TextChunk
from router.calls import CallOptions, CallPath
from router.consortium.budget import RunContext, emit
from router.consortium.spec import ConsortiumConfig, MemberSpec
from router.consortium.trace import OUT_OF_TIME, MemberRecord

__all__ = ["Slot", "run_members"]

_STREAM_EVENT_EVERY = 8  # emit a streaming event every N chunks: enough for a live view


@dataclass(frozen=True)
class Slot:
    """One member sample to call this round."""

    spec: MemberSpec
    sample: int
    name: str
    request: Request


def member_messages(messages: Sequence[Message], system: str | None) -> list[Message]:
    """`system` goes first; a system prompt already in the conversation is kept after it."""
    if not system:
        return list(messages)
    existing = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    merged = "\n\n".join([system, *(str(m.get("content") or "") for m in existing)])
    return [{"role": "system", "content": merged}, *rest]


class _Fanout:
    """The members of one round, sharing the run's budget, concurrency limit and deadline. Every
    call goes through the router's call path, which retries, charges the budget, holds the
    concurrency slots, feeds the breakers and the latency model."""

    def __init__(self, run: RunContext, spec: ConsortiumConfig, t0: float, deadline: Deadline, calls: CallPath):
        self.run = run
        self.spec = spec
        self.t0 = t0  # perf_counter at the start of the consortium run
        self.deadline = deadline
        self.calls = calls

    async def call(self, slot: Slot, record: MemberRecord) -> None:
        """Fill `record` with the member's answer or its failures; raises only on cancellation
        and on errors that are not model failures."""
        started = time.perf_counter()

        def failed_attempt(error: BaseException, elapsed_s: float) -> None:
            record.attempts.append({"attempt": len(record.attempts) + 1, "error": type(error).__name__,
                                    "message": str(error), "elapsed_s": elapsed_s})

        options = CallOptions(deadline=self.deadline, retries=self.spec.retries, label=f"member {record.label}",
                              attempt_timeout_s=self.spec.member_timeout_s, on_error=failed_attempt)
        try:
            record.status, record.started_s = "running", started - self.t0
            emit(self.run, _event(self.run, record))
            await _stream_into(self.calls, slot, record, self.run, options)
        except (BackendError, AllBackendsFailed) as exc:
            if not record.attempts or record.attempts[-1]["message"] != str(exc):
                failed_attempt(exc, time.perf_counter() - started)  # refused before it ran, or a nested run
            record.status = "failed"
            emit(self.run, _event(self.run, record))
            return
        except asyncio.CancelledError:
            record.status = "cancelled"
            emit(self.run, _event(self.run, record))
            raise
        record.latency_s = time.perf_counter() - started
        record.status = "done"
        emit(self.run, _event(self.run, record))


async def _stream_into(calls: CallPath, slot: Slot, record: MemberRecord, run: RunContext,
                       options: CallOptions) -> None:
    record.streamed_tokens = 0
    async with contextlib.aclosing(calls.stream(slot.name, slot.request, options)) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, TextChunk):
                record.streamed_tokens += 1
                if record.status != "streaming" or record.streamed_tokens % _STREAM_EVENT_EVERY == 0:
                    record.status = "streaming"
                    emit(run, _event(run, record))
            elif isinstance(chunk, FinalChunk):
                record.completion = chunk.completion


def _event(run: RunContext, record: MemberRecord) -> dict:
    c = record.completion
    return {
        "type": "member", "path": run.path, "id": record.label, "status": record.status,
        "tokens": c.usage.output_tokens if c is not None else record.streamed_tokens,
        "latency_s": record.latency_s, "error": record.attempts[-1]["message"] if record.attempts else None,
    }


async def run_members(slots: Sequence[Slot], records: Sequence[MemberRecord], run: RunContext,
                      spec: ConsortiumConfig, t0: float, deadline: Deadline, calls: CallPath) -> None:
    """Run every slot, stop waiting once `spec.quorum` answered (default: all), give stragglers
    `spec.grace_s`, cancel what is left and wait for the cancellations to finish."""
    fanout = _Fanout(run, spec, t0, deadline, calls)
    remaining = deadline.remaining
    for record in records:
        emit(run, _event(run, record))
    tasks = {asyncio.create_task(fanout.call(s, r), name=f"member {r.label}"): r
             for s, r in zip(slots, records, strict=True)}
    needed = spec.quorum or len(tasks)
    # Without a quorum every member is waited for, and one failing must not cancel the others:
    # the round only becomes hopeless when no member can answer any more.
    required = spec.quorum or 1
    try:
        pending = await _until_enough(set(tasks), records, needed, required, remaining)
        if pending and _answered(records) >= needed and spec.grace_s > 0:
            left = _positive(remaining())
            await asyncio.wait(pending, timeout=spec.grace_s if left is None else min(spec.grace_s, left))
    finally:
        # Also runs when the caller cancels us: nothing may keep calling models after we return.
        # A member still needed when the deadline passed is lost, not merely cancelled.
        await _cancel_rest(tasks, lost=deadline.expired() and _answered(records) < needed)


async def _cancel_rest(tasks: dict[asyncio.Task, MemberRecord], *, lost: bool = False) -> None:
    leftover = [task for task in tasks if not task.done()]
    for task in leftover:
        task.cancel()
    await asyncio.gather(*leftover, return_exceptions=True)
    for task in leftover:
        record = tasks[task]
        if record.status in ("done", "failed"):
            continue
        if lost:  # the answer is weaker than configured: degraded.py reports it
            record.status, record.note = "failed", OUT_OF_TIME
            record.attempts.append({"attempt": len(record.attempts) + 1, "error": "BackendTimeout",
                                    "message": OUT_OF_TIME, "elapsed_s": None})
        else:
            record.status = "cancelled"  # also those cancelled before they ever ran
            record.note = "cancelled: enough answers arrived first"


def _answered(records: Sequence[MemberRecord]) -> int:
    return sum(r.status == "done" for r in records)


async def _until_enough(pending: set[asyncio.Task], records: Sequence[MemberRecord], needed: int,
                        required: int, remaining: Callable[[], float | None]) -> set[asyncio.Task]:
    """Wait until `needed` answered, or `required` became impossible, or the deadline passed."""
    while pending:
        done, pending = await asyncio.wait(pending, timeout=_positive(remaining()),
                                           return_when=asyncio.FIRST_COMPLETED)
        if not done:
            return pending  # the consortium's deadline passed
        for task in done:
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error  # not a model failure (a bug, a usage error): stop the round
        answered = _answered(records)
        if answered >= needed or answered + len(pending) < required:
            return pending
    return pending


def _positive(value: float | None) -> float | None:
    return None if value is None else max(0.0, value)
