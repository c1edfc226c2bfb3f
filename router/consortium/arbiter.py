"""One round's judgement: build the arbiter prompt, call the arbiter, read its verdict, and
turn it into the round's answer. Every fallback is written into the ArbiterRecord."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from backends.base import Backend
from backends.errors import AllBackendsFailed, BackendError, BackendTimeout
from backends.types import Message, Request, Usage
from policies.judging import Verdict, order_candidates, parse_verdict
from router.consortium.budget import BudgetExhausted, RunContext, emit
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


def _context_tokens(spec: ConsortiumConfig, arbiter: Backend) -> int:
    return spec.arbiter_context_tokens or arbiter.settings.context_window or DEFAULT_CONTEXT_TOKENS


async def judge(messages: Sequence[Message], candidates: Sequence[Candidate], arbiter: Backend,
                spec: ConsortiumConfig, run: RunContext, record: ArbiterRecord, *,
                reserved: bool, remaining: Callable[[], float | None]) -> Judgement:
    """The round's answer from `candidates` (at least one). `reserved`: one budget call was
    put aside for the arbiter at the start of the round."""
    metrics = [c.metrics for c in candidates]
    if len(candidates) == 1:
        if reserved:
            run.budget.release()
        record.status, record.fallback = "skipped", "only one candidate: nothing to judge"
        record.order = [candidates[0].source]
        return Judgement(candidates[0].text, 0, None, [], Usage())
    nonce = secrets.token_hex(8)
    prompt = arbiter_prompt(messages, candidates, judging=spec.judging, nonce=nonce,
                            context_tokens=_context_tokens(spec, arbiter), reply_tokens=spec.arbiter_max_tokens)
    record.prompt_chars = sum(len(str(m["content"])) for m in prompt.messages)
    record.truncated = prompt.truncated
    reply = await _call_arbiter(arbiter, prompt.messages, spec, run, record, reserved, remaining)
    if reply is None:
        order = order_candidates([list(range(len(candidates)))], metrics)
        record.fallback = (f"arbiter failed ({record.errors[-1]['error'] if record.errors else 'no reply'}); "
                           "returned the first answer, simplest code first")
        record.order = [candidates[i].source for i in order]
        return Judgement(candidates[order[0]].text, order[0], None, [], Usage())
    verdict = parse_verdict(reply.text, nonce, len(candidates), want_answer=spec.judging == "synthesis")
    record.verdict = verdict.as_dict()
    order = order_candidates(verdict.ranking, metrics)
    record.order = [candidates[i].source for i in order]
    answer = _answer(reply.text, verdict, candidates, order, spec, record)
    if verdict.notes and record.fallback is None:
        record.fallback = "; ".join(verdict.notes)
    return Judgement(answer, order[0], verdict.confidence, verdict.refine, reply.usage)


def _answer(text: str, verdict: Verdict, candidates: Sequence[Candidate], order: list[int],
            spec: ConsortiumConfig, record: ArbiterRecord) -> str:
    if spec.judging == "rank" or verdict.answer:
        return verdict.answer if spec.judging == "synthesis" else candidates[order[0]].text
    # Synthesis without an answer tag: a reply with none of our tags is most likely the answer
    # written plainly; otherwise the arbiter ranked but wrote no answer, so the best one stands in.
    if text.strip() and not _OUR_TAG.search(text):
        record.fallback = "synthesis reply had no tags; the whole reply was used as the answer"
        return text.strip()
    record.fallback = "synthesis reply had no answer tag; the top-ranked candidate was returned verbatim"
    return candidates[order[0]].text


async def _call_arbiter(arbiter: Backend, messages: list[Message], spec: ConsortiumConfig, run: RunContext,
                        record: ArbiterRecord, reserved: bool, remaining: Callable[[], float | None]):
    nested = getattr(arbiter, "kind", None) == "consortium"
    tries = 1 + (0 if nested else spec.retries)
    if nested and reserved:
        run.budget.release()  # a nested arbiter charges its own calls
    holding = reserved and not nested  # the reservation is still ours to spend or give back
    for attempt in range(1, tries + 1):
        left = remaining()
        if left is not None and left <= 0:
            record.errors.append({"attempt": attempt, "error": "BackendTimeout",
                                  "message": "the consortium's deadline passed before the arbiter was asked"})
            break
        started = time.perf_counter()
        try:
            if not nested:
                run.budget.take("the arbiter", reserved=holding)
                holding = False
            record.status = "running"
            emit(run, {"type": "arbiter", "path": run.path, "id": record.arbiter, "status": "running"})
            request = Request(messages=messages, max_tokens=spec.arbiter_max_tokens, timeout_s=left)
            completion = await arbiter.complete(request)
        except (BackendError, AllBackendsFailed) as exc:
            record.errors.append({"attempt": attempt, "error": type(exc).__name__, "message": str(exc),
                                  "elapsed_s": time.perf_counter() - started})
            if isinstance(exc, BudgetExhausted) or (isinstance(exc, BackendError) and not exc.retryable
                                                    and not isinstance(exc, BackendTimeout)):
                break
            continue
        record.completion, record.status = completion, "done"
        record.latency_s = time.perf_counter() - started
        emit(run, {"type": "arbiter", "path": run.path, "id": record.arbiter, "status": "done",
                   "latency_s": record.latency_s, "tokens": completion.usage.output_tokens})
        return completion
    if holding:
        run.budget.release()
    record.status = "failed"
    emit(run, {"type": "arbiter", "path": run.path, "id": record.arbiter, "status": "failed",
               "error": record.errors[-1]["message"] if record.errors else None})
    return None
