"""A consortium: fan a prompt out to member models, let an arbiter rank or synthesize, iterate
while the arbiter is unsure. It is a Backend itself, so it can be a member or the arbiter of
another consortium, or be named wherever a backend is.

    cns = Consortium("cns-glm", spec, resolve=router.backend, calls=router.calls)
    completion = await cns.complete(Request(messages=[{"role": "user", "content": "..."}]))
    completion.metadata["trace"]   # every member answer, arbiter decision, timing, token, cost

Members and the arbiter are looked up through `resolve(name)` when a run starts and called
through the router's call path (`calls`), so a member that is itself a consortium runs nested,
charging the same call budget and holding the same concurrency slots.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any, ClassVar

from backends import errors as error_tree
from backends.base import Backend, BackendSettings
from backends.capabilities import Capabilities
from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, BackendError, BadRequest, UsageError
from backends.faults import field_named
from backends.types import Chunk, Completion, FinalChunk, Request, TextChunk, Timings, ToolCallChunk, Usage
from policies.judging import code_metrics, over_budget
from router.calls import CallPath
from router.consortium.arbiter import Judgement, judge
from router.consortium.budget import (
    MAX_DEPTH,
    BudgetExhausted,
    CallBudget,
    Listener,
    Reservation,
    RunContext,
    current_run,
)
from router.consortium.degraded import degraded
from router.consortium.members import Slot, member_messages, run_members
from router.consortium.prompts import Candidate, refinement_messages
from router.consortium.spec import ConsortiumConfig
from router.consortium.trace import ArbiterRecord, MemberRecord, RoundRecord, add_usage

__all__ = ["MEMBERS_SHARE", "Consortium"]

# The share of a run's time left that its members may use when it has a deadline; the rest is
# the arbiter's. Without it the arbiter of a run cut by the deadline would get no time at all.
MEMBERS_SHARE = 0.75


class Consortium(Backend):
    """N models (or N samples of one) and an arbiter, behind the Backend interface."""

    kind = "consortium"
    capabilities: ClassVar[Capabilities] = Capabilities(composite=True)

    def __init__(self, name: str, spec: ConsortiumConfig, resolve: Callable[[str], Backend], calls: CallPath, *,
                 listeners: list[Listener] | None = None):
        super().__init__(BackendSettings(name=name, model=f"consortium:{name}", max_retries=0))
        self.spec = spec
        self._resolve = resolve
        self.calls = calls
        self.listeners: list[Listener] = list(listeners or [])

    def current_capabilities(self) -> Capabilities:
        """Tools and a response format only when judging by rank (the winner's answer, tool
        calls included, is returned as it is) and every member takes them."""
        members = [self._resolve(m.model).current_capabilities() for m in self.spec.members]
        ranked = self.spec.judging == "rank"
        return Capabilities(composite=True, tools=ranked and all(c.tools for c in members),
                            structured_output=ranked and all(c.structured_output for c in members))

    def refusal(self, need: str) -> str | None:
        if need in ("tools", "structured") and self.spec.judging == "synthesis":
            what = "the members' tool calls" if need == "tools" else "an answer held to the response format"
            return (f"consortium {self.name!r} judges by synthesis: its arbiter writes a new answer in its own "
                    f"words and cannot return {what}; with `judging: rank` the winning member's answer is "
                    "returned as it is")
        if need not in ("tools", "structured"):
            return None
        for member in self.spec.members:
            backend = self._resolve(member.model)
            able = backend.current_capabilities()
            if not (able.tools if need == "tools" else able.structured_output):
                why = backend.refusal(need)
                return f"its member {member.model!r} cannot" + (f" ({why})" if why else "")
        return None

    def add_listener(self, listener: Listener) -> None:
        """`listener(event)` gets every member/arbiter/round event of runs of this consortium and
        of the consortia nested in it (for live views), `answer` when the answer starts streaming,
        and `finished` when a run has its answer. It must be quick and must not raise."""
        self.listeners.append(listener)

    async def stream(self, request: Request) -> AsyncGenerator[Chunk, None]:
        """The answer's text, then the FinalChunk. A synthesis streams as the arbiter writes it
        (in the final round); a ranked answer arrives whole once the arbiter has chosen it.
        Progress before that goes to listeners."""
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        task = asyncio.create_task(self._complete(request, queue.put_nowait), name=f"consortium {self.name}")
        task.add_done_callback(lambda _: queue.put_nowait(None))
        sent = ""
        try:
            while (piece := await queue.get()) is not None:
                if not sent:
                    self._answer_starts()
                sent += piece
                yield TextChunk(piece)
            completion = task.result()
        finally:
            if not task.done():  # the caller stopped reading: stop calling models
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        rest = completion.text[len(sent):]  # the run keeps what was streamed as the answer's start
        if rest:
            if not sent:
                self._answer_starts()
            yield TextChunk(rest)
        for index, call in enumerate(completion.tool_calls or ()):  # a ranked winner's calls, whole
            function = call.get("function") or {}
            yield ToolCallChunk(index, function.get("arguments") or "", id=call.get("id"), name=function.get("name"))
        yield FinalChunk(completion)

    def _answer_starts(self) -> None:
        for listener in self.listeners:
            listener({"type": "answer", "path": self.name, "status": "streaming"})

    async def complete(self, request: Request) -> Completion:
        return await self._complete(request, None)

    async def _complete(self, request: Request, sink: Callable[[str], None] | None) -> Completion:
        var = current_run()
        parent = var.get()
        if parent is not None and parent.depth + 1 > MAX_DEPTH:
            raise UsageError(f"consortium {self.name!r} is nested more than {MAX_DEPTH} deep; "
                             "a consortium probably contains itself")
        budget = CallBudget(self.spec.effective_budget, self.name, parent.budget if parent else None)
        run = RunContext(
            budget=budget,
            path=f"{parent.path}/{self.name}" if parent else self.name,
            depth=parent.depth + 1 if parent else 0,
            listeners=[*(parent.listeners if parent else []), *self.listeners],
            limits=(*(parent.limits if parent else ()), asyncio.Semaphore(self.spec.max_concurrency)),
        )
        token = var.set(run)
        try:
            return await _Run(self, run, request, sink).execute()
        finally:
            var.reset(token)


def _judged_text(completion: Completion) -> str:
    """What the arbiter reads of a member's answer: its text, and each tool call it makes."""
    calls = [f"[calls tool {(c.get('function') or {}).get('name')} with arguments "
             f"{(c.get('function') or {}).get('arguments') or '{}'}]" for c in completion.tool_calls or ()]
    return "\n".join([completion.text, *calls]) if completion.text else "\n".join(calls)


def _reject_complex(candidates: list[Candidate], done: list[MemberRecord], record: RoundRecord,
                    budget: float) -> list[Candidate]:
    """Leave out candidates whose code is over `budget` times their siblings' (and say why)."""
    rejected = over_budget([c.metrics for c in candidates], budget)
    for i, why in rejected.items():
        record.rejected[candidates[i].source] = why
        done[i].status, done[i].note = "rejected", why
    return [c for i, c in enumerate(candidates) if i not in rejected]


class _Run:
    """One run of one consortium: rounds until confident, out of iterations, or out of budget."""

    def __init__(self, consortium: Consortium, run: RunContext, request: Request,
                 sink: Callable[[str], None] | None = None):
        self.c = consortium
        self.sink = sink  # gets the final synthesis as the arbiter writes it
        self.spec = consortium.spec
        self.run = run
        self.request = request
        self.t0 = time.perf_counter()
        self.deadline = Deadline(request.timeout_s)
        self.rounds: list[RoundRecord] = []
        self.usage = Usage()
        self.cost = 0.0
        self.simulated = False
        self.stopped: str | None = None
        self.winner: Completion | None = None  # the judged round's best member answer

    async def execute(self) -> Completion:
        messages = self.request.messages
        judgement = await self._round(1, messages)
        for iteration in range(1, self.spec.max_iterations + 1):
            if iteration > 1:
                if not self._can_iterate():
                    break
                judgement = await self._round(iteration, messages)
            self.stopped = self._stop_reason(iteration, judgement.confidence, judgement.streamed)
            if self.stopped:
                break
            if self._calls_tools():
                self.stopped = "the answer is a tool call, returned as it is; not iterating further"
                break
            messages = refinement_messages(self.request.messages, judgement.answer, judgement.refine)
        completion = self._completion(judgement.answer, judgement.confidence)
        self.run_event("finished", status="done")  # every member and arbiter is settled: views show the end
        return completion

    def _stop_reason(self, iteration: int, confidence: float | None, streamed: bool = False) -> str | None:
        """Why this round is the last, or None to refine the answer in another round."""
        spec = self.spec
        if iteration >= spec.max_iterations:
            return f"max_iterations ({spec.max_iterations}) reached"
        if iteration < spec.min_iterations:
            return None
        if confidence is None:
            return "the arbiter gave no confidence; not iterating further"
        if confidence >= spec.confidence_threshold:
            return f"confidence {confidence:.2f} reached the threshold {spec.confidence_threshold:.2f}"
        if streamed:  # the confidence came after the answer, which the caller already has
            return "the answer was already streamed; not iterating further"
        return None

    def _calls_tools(self) -> bool:
        return self.spec.judging == "rank" and self.winner is not None and bool(self.winner.tool_calls)

    def _members_deadline(self) -> Deadline:
        """Members leave the arbiter time to judge: at most MEMBERS_SHARE of the time left, when
        there is a deadline and more than one answer to judge. A nested consortium answers
        within its share too, so a member lost at any depth still reaches the outer answer."""
        remaining = self.deadline.remaining()
        if remaining is None or self.spec.size < 2:
            return self.deadline
        return self.deadline.within(max(0.0, remaining) * MEMBERS_SHARE)

    def _can_iterate(self) -> bool:
        if self.deadline.expired():
            self.stopped = "the deadline passed; no further iteration"
            return False
        available = self.run.budget.available()
        if available is not None and available < (self.spec.quorum or 1) + 1:
            self.stopped = f"call budget nearly spent ({available} left); no further iteration"
            return False
        return True

    def _slots(self, messages, records: list[MemberRecord]) -> list[Slot]:
        slots = []
        for entry in self.spec.members:
            backend = self.c._resolve(entry.model)
            msgs = member_messages(messages, entry.system or self.spec.system)
            for sample in range(1, entry.n + 1):
                extra = dict(self.request.extra)
                if entry.n > 1 and backend.capabilities.seed and "seed" not in extra:
                    # N samples of one model must differ; OpenAI-compatible servers take a seed.
                    extra["seed"] = sample
                temperature = entry.temperature if entry.temperature is not None else self.request.temperature
                request = Request(messages=msgs, max_tokens=self.request.max_tokens, temperature=temperature,
                                  stop=self.request.stop, extra=extra)
                slots.append(Slot(entry, sample, entry.model, request))
                records.append(MemberRecord(entry.model, sample))
        return slots

    async def _round(self, iteration: int, messages) -> Judgement:
        started = time.perf_counter()
        records: list[MemberRecord] = []
        slots = self._slots(messages, records)
        arbiter = self.c._resolve(self.spec.arbiter)
        arbiter_record = ArbiterRecord(self.spec.arbiter)
        record = RoundRecord(iteration, records, arbiter_record)
        self.rounds.append(record)
        self.run_event("round", iteration=iteration, status="running")
        reserved = self._reserve_arbiter(arbiter, iteration)
        try:
            await run_members(slots, records, self.run, self.spec, self.t0, self._members_deadline(), self.c.calls)
            for r in records:
                self._account(r.completion)
            candidates = self._candidates(iteration, record)
            judgement = await judge(messages, candidates, arbiter, self.spec, self.run, arbiter_record,
                                    reserved=reserved, deadline=self.deadline, calls=self.c.calls,
                                    stream_to=self.sink,
                                    is_final=lambda confidence: self._stop_reason(iteration, confidence) is not None)
        finally:
            if reserved is not None:
                reserved.release()  # no-op once the arbiter spent it
        self._account(arbiter_record.completion)
        self.winner = candidates[judgement.best].completion
        record.answer, record.confidence = judgement.answer, judgement.confidence
        record.wall_s = time.perf_counter() - started
        self.run_event("round", iteration=iteration, status="done", confidence=judgement.confidence)
        return judgement

    def _reserve_arbiter(self, arbiter: Backend, iteration: int) -> Reservation | None:
        """Put the arbiter's call aside before the members start, so they cannot spend the last
        of the budget. A nested arbiter charges its own calls: nothing to put aside."""
        if arbiter.capabilities.composite:
            return None
        reserved = self.run.budget.reserve()
        if reserved is None:
            raise BudgetExhausted(f"call budget of {self.c.name!r} has no call left for round {iteration}",
                                  backend=self.c.name, model=self.c.model)
        return reserved

    def _candidates(self, iteration: int, record: RoundRecord) -> list[Candidate]:
        """The answers to judge: every member that answered, less any over the complexity budget.
        Raises when too few answered."""
        done = [r for r in record.members if r.status == "done"]
        if not done or (self.spec.quorum and len(done) < self.spec.quorum):
            raise self._failure(iteration, record.members, len(done))
        candidates = [Candidate(_judged_text(r.completion), r.label, code_metrics(r.completion.text), r.completion)
                      for r in done if r.completion is not None]
        if not self.spec.complexity_budget:
            return candidates
        return _reject_complex(candidates, done, record, self.spec.complexity_budget)

    def _account(self, completion: Completion | None) -> None:
        if completion is None:
            return
        self.usage = add_usage(self.usage, completion.usage)
        self.cost += completion.cost_usd
        self.simulated = self.simulated or bool(completion.metadata.get("simulated"))

    def _failure(self, iteration: int, records: list[MemberRecord], answered: int) -> AllBackendsFailed:
        errors: list[Exception] = []
        for r in records:
            for a in r.attempts:
                # Of the attempt's own class, so whose fault it was survives (a refused request stays a 400).
                errors.append(_error(a["error"], f"{r.label} attempt {a['attempt']}: {a['error']}: {a['message']}",
                                     r.member))
            if r.status == "cancelled":
                errors.append(BackendError(f"{r.label}: {r.note or 'cancelled'}", backend=r.member))
        total = len(records)
        if answered == 0:
            what = f"all {total} member calls failed"
        else:
            what = f"only {answered} of {total} members answered; the quorum is {self.spec.quorum}"
        message = (f"consortium {self.c.name!r}, round {iteration}: {what}. Check the members with "
                   "`route doctor`, or raise member_timeout_s / lower quorum.")
        return AllBackendsFailed(message, errors or [BackendError(what, backend=self.c.name)])

    def run_event(self, kind: str, **fields: Any) -> None:
        from router.consortium.budget import emit

        emit(self.run, {"type": kind, "path": self.run.path, **fields})

    def _completion(self, answer: str, confidence: float | None) -> Completion:
        wall = time.perf_counter() - self.t0
        trace = {
            "id": uuid.uuid4().hex,  # ties the request log's record to this trace
            "consortium": self.c.name,
            "judging": self.spec.judging,
            "arbiter": self.spec.arbiter,
            "rounds": [r.as_dict() for r in self.rounds],
            "confidence": confidence,
            "stopped": self.stopped,
            "calls": self.run.budget.used,
            "budget": self.run.budget.as_dict(),
            "usage": {"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens},
            "cost_usd": self.cost,
            "wall_s": wall,
        }
        metadata: dict[str, Any] = {"trace": trace, "trace_id": trace["id"], "consortium": self.c.name,
                                    "calls": self.run.budget.used}
        if self.simulated:
            metadata["simulated"] = True
        if lost := degraded(trace):  # a weaker answer than configured must say so (degraded.py)
            metadata["degraded"] = lost
        tool_calls, finish = None, "stop"
        if self._calls_tools() and self.winner is not None:  # the winning call, as the member made it
            answer, tool_calls, finish = self.winner.text, self.winner.tool_calls, self.winner.finish_reason or "tool_calls"
        return Completion(text=answer, backend=self.c.name, model=self.c.model, finish_reason=finish,
                          usage=self.usage, timings=Timings(ttft_s=None, total_s=wall), cost_usd=self.cost,
                          tool_calls=tool_calls, metadata=metadata)


def _error(name: str, message: str, member: str) -> BackendError:
    """A member's failed attempt as an error of its own class (backends/errors.py `name`), so
    whose fault it was survives; a refused request keeps the field it named."""
    kind = getattr(error_tree, name, None)
    if kind is BadRequest:
        return BadRequest(message, backend=member, param=field_named(message))
    return (kind if isinstance(kind, type) and issubclass(kind, BackendError) else BackendError)(message, backend=member)
