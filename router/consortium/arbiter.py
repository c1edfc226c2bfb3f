"""One round's judgement: build the arbiter prompt, call the arbiter, read its verdict, and
turn it into the round's answer. Every fallback is written into the ArbiterRecord."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from backends.base import Backend
from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, BackendError, MalformedResponse
from backends.types import Completion, FinalChunk, Message, Request, TextChunk, Usage
from policies.judging import Verdict, order_candidates, parse_verdict, read_confidence
from router.calls import CallOptions, CallPath
from router.consortium.answer_stream import AnswerStream
from router.consortium.budget import Reservation, RunContext, emit
from router.consortium.prompts import Candidate, arbiter_prompt
from router.consortium.spec import ConsortiumConfig
from router.consortium.trace import ArbiterRecord

__all__ = ["Judgement", "judge"]

DEFAULT_CONTEXT_TOKENS = 8192  # when neither the config nor the arbiter's backend says
_OUR_TAG = re.compile(r"</?(ranking|confidence|refine|answer)\b", re.IGNORECASE)


@dataclass
class Judgement:
    answer: str
    best: int  # index of the best candidate
    confidence: float | None
    refine: list[str]
    usage: Usage
    streamed: bool = False  # the answer already went out to the caller as it was written


def _context_tokens(spec: ConsortiumConfig, arbiter: Backend) -> int:
    return spec.arbiter_context_tokens or arbiter.settings.context_window or DEFAULT_CONTEXT_TOKENS


async def judge(messages: Sequence[Message], candidates: Sequence[Candidate], arbiter: Backend,
                spec: ConsortiumConfig, run: RunContext, record: ArbiterRecord, *,
                reserved: Reservation | None, deadline: Deadline, calls: CallPath,
                stream_to: Callable[[str], None] | None = None,
                is_final: Callable[[float | None], bool] | None = None) -> Judgement:
    """The round's answer from `candidates` (at least one). `reserved`: the budget call put
    aside for the arbiter at the start of the round (None for a nested arbiter).
    `stream_to` (synthesis only) receives the answer as the arbiter writes it, if
    `is_final(confidence)` says this round's answer is the one to return."""
    call = _ArbiterCall(arbiter, spec, run, record, reserved, deadline, calls)
    if len(candidates) == 1:
        call.give_back()
        record.status, record.fallback = "skipped", "only one candidate: nothing to judge"
        record.order = [candidates[0].source]
        return Judgement(candidates[0].text, 0, None, [], Usage())
    nonce = secrets.token_hex(8)
    prompt = arbiter_prompt(messages, candidates, judging=spec.judging, nonce=nonce,
                            context_tokens=_context_tokens(spec, arbiter), reply_tokens=spec.arbiter_max_tokens)
    record.prompt_chars = sum(len(str(m["content"])) for m in prompt.messages)
    record.truncated = prompt.truncated
    streamer = None
    if stream_to is not None and is_final is not None and spec.judging == "synthesis":
        streamer = AnswerStream(nonce, lambda prefix: is_final(read_confidence(prefix, nonce)), stream_to)
    reply = await call.ask(prompt.messages, streamer)
    if reply is None:
        return _without_arbiter(candidates, record)
    return _judgement(reply, nonce, candidates, spec, record, streamer)


def _judgement(reply: Completion, nonce: str, candidates: Sequence[Candidate], spec: ConsortiumConfig,
               record: ArbiterRecord, streamer: AnswerStream | None) -> Judgement:
    """The round's outcome from the arbiter's reply, with every fallback recorded."""
    verdict = parse_verdict(reply.text, nonce, len(candidates), want_answer=spec.judging == "synthesis")
    record.verdict = verdict.as_dict()
    order = order_candidates(verdict.ranking, [c.metrics for c in candidates])
    record.order = [candidates[i].source for i in order]
    streamed = streamer.text if streamer is not None else ""
    answer = streamed or _answer(reply.text, verdict, candidates, order, spec, record)
    if streamed and streamer is not None and not streamer.closed:
        record.fallback = "the answer tag was never closed; the answer is the text streamed until the end"
    if verdict.notes and record.fallback is None:
        record.fallback = "; ".join(verdict.notes)
    return Judgement(answer, order[0], verdict.confidence, verdict.refine, reply.usage, streamed=bool(streamed))


def _without_arbiter(candidates: Sequence[Candidate], record: ArbiterRecord) -> Judgement:
    """The arbiter could not answer: every candidate counts as tied, simplest code first."""
    order = order_candidates([list(range(len(candidates)))], [c.metrics for c in candidates])
    why = record.errors[-1]["error"] if record.errors else "no reply"
    record.fallback = f"arbiter failed ({why}); returned the first answer, simplest code first"
    record.order = [candidates[i].source for i in order]
    return Judgement(candidates[order[0]].text, order[0], None, [], Usage())


def _answer(text: str, verdict: Verdict, candidates: Sequence[Candidate], order: list[int],
            spec: ConsortiumConfig, record: ArbiterRecord) -> str:
    if spec.judging == "rank":
        return candidates[order[0]].text
    if verdict.answer:
        return verdict.answer
    # Synthesis without an answer tag: a reply with none of our tags is most likely the answer
    # written plainly; otherwise the arbiter ranked but wrote no answer, so the best one stands in.
    if text.strip() and not _OUR_TAG.search(text):
        record.fallback = "synthesis reply had no tags; the whole reply was used as the answer"
        return text.strip()
    record.fallback = "synthesis reply had no answer tag; the top-ranked candidate was returned verbatim"
    return candidates[order[0]].text


class _ArbiterCall:
    """Asks the arbiter through the call path (which retries and charges the budget, the round's
    reservation first), recording every failed attempt."""

    def __init__(self, arbiter: Backend, spec: ConsortiumConfig, run: RunContext, record: ArbiterRecord,
                 reserved: Reservation | None, deadline: Deadline, calls: CallPath):
        self.arbiter, self.spec, self.run, self.record = arbiter, spec, run, record
        self.deadline, self.calls = deadline, calls
        self.nested = arbiter.capabilities.composite
        self.reserved = reserved
        if self.nested:
            self.give_back()  # a nested arbiter charges its own calls

    def give_back(self) -> None:
        if self.reserved is not None:
            self.reserved.release()
            self.reserved = None

    def _emit(self, status: str, **fields: Any) -> None:
        emit(self.run, {"type": "arbiter", "path": self.run.path, "id": self.record.arbiter, "status": status,
                        **fields})

    def _failed_attempt(self, error: BaseException, elapsed_s: float) -> None:
        self.record.errors.append({"attempt": len(self.record.errors) + 1, "error": type(error).__name__,
                                   "message": str(error), "elapsed_s": elapsed_s})

    async def ask(self, messages: list[Message], streamer: AnswerStream | None = None) -> Completion | None:
        """The arbiter's reply, or None when every attempt failed (each is in the record).
        Once answer text has gone out through `streamer`, a failure is raised."""
        if self.deadline.expired():
            self.record.errors.append({"attempt": 1, "error": "BackendTimeout",
                                       "message": "the consortium's deadline passed before the arbiter was asked"})
            self._gave_up()
            return None
        options = CallOptions(deadline=self.deadline, retries=self.spec.retries, label="the arbiter",
                              reservation=self.reserved, on_error=self._failed_attempt)
        self.reserved = None  # the call path spends it
        request = Request(messages=messages, max_tokens=self.spec.arbiter_max_tokens)
        self.record.status = "running"
        self._emit("running")
        started = time.perf_counter()
        try:
            if streamer is None:
                completion = await self.calls.complete(self.arbiter.name, request, options)
            else:
                completion = await _streamed(self.calls, self.arbiter.name, request, options, streamer)
        except (BackendError, AllBackendsFailed) as exc:
            if not self.record.errors or self.record.errors[-1]["message"] != str(exc):
                self._failed_attempt(exc, time.perf_counter() - started)
            if streamer is not None and streamer.text:
                self.record.status = "failed"
                raise  # part of the answer reached the caller: another reply would garble it
            if options.reservation is not None:
                options.reservation.release()  # no-op once spent
            self._gave_up()
            return None
        self.record.completion, self.record.status = completion, "done"
        self.record.latency_s = time.perf_counter() - started
        self._emit("done", latency_s=self.record.latency_s, tokens=completion.usage.output_tokens)
        return completion

    def _gave_up(self) -> None:
        self.give_back()
        self.record.status = "failed"
        self._emit("failed", error=self.record.errors[-1]["message"] if self.record.errors else None)


async def _streamed(calls: CallPath, name: str, request: Request, options: CallOptions,
                    streamer: AnswerStream) -> Completion:
    async with contextlib.aclosing(calls.stream(name, request, options)) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, TextChunk):
                streamer.feed(chunk.text)
            elif isinstance(chunk, FinalChunk):
                return chunk.completion
    raise MalformedResponse("stream ended without a final completion", backend=name)
