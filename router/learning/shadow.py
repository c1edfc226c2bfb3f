"""Shadow judging: one routed request, answered by the other tier of its boundary too, and judged.

After the client has its answer, a backend of the other tier answers the same conversation and
the judge (an arbiter backend) compares the two answers: pairwise, with the arbiter's nonce-tagged
prompt and verdict (router/consortium/prompts.py, policies/judging.py), asked in both orders to
cancel position bias, ties allowed. The two votes become one label (labels.verdict_label).
Every call goes through the router's call path (router/calls.py), so deadlines, retries,
breakers, rate limits and latency learning hold for these calls as for any other.

Which pair: a prompt that stayed in tier k was judged by the boundary above it (k against
k+1); one that reached the top tier by the boundary below (k-1 against k). A request a
fallback answered from another tier is not judged (its decision did not pick that tier).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, BackendError
from backends.types import Completion, Message, Price, Request
from policies.judging import parse_verdict
from router.calls import CallOptions, CallPath
from router.consortium.prompts import CHARS_PER_TOKEN, Candidate, arbiter_prompt
from router.learning.labels import verdict_label

if TYPE_CHECKING:
    from policies.ladder import Tier
    from router.config import LearnConfig
    from router.decision import Outcome

__all__ = ["Judged", "Pair", "ShadowJudge", "pair_of"]

_CONTEXT_TOKENS = 8192  # the judge's context when its backend does not say


@dataclass(frozen=True, slots=True)
class Pair:
    """`boundary` between tiers `lower` and `lower + 1`; `answered` is the tier whose answer the
    client got, `other` the tier to ask now."""

    boundary: int
    answered: int
    other: int

    @property
    def client_is_lower(self) -> bool:
        return self.answered == self.boundary


def pair_of(tiers: Sequence[Tier], outcome: Outcome) -> Pair | None:
    """The boundary a finished request can teach about, or None (forced, failed, a fallback
    from another tier answered, tool calls, or only one tier)."""
    k = _answering_tier(tiers, outcome)
    if k is None or len(tiers) < 2:
        return None
    return Pair(k - 1, k, k - 1) if k == len(tiers) - 1 else Pair(k, k, k + 1)


def _answering_tier(tiers: Sequence[Tier], outcome: Outcome) -> int | None:
    """The index of the tier the decision picked, if a backend of it gave a plain answer."""
    result, decision = outcome.result, outcome.decision
    if result is None or decision.forced or result.completion.tool_calls or not result.completion.text.strip():
        return None  # a tool call is not an answer a judge can compare
    names = [t.name for t in tiers]
    k = names.index(decision.tier) if decision.tier in names else None
    return k if k is not None and result.completion.backend in tiers[k].backends else None


@dataclass(frozen=True, slots=True)
class Judged:
    """One shadow judgement: the label (None without a readable verdict), what it cost."""

    label: tuple[float, float] | None
    votes: tuple[int | None, ...]
    cost_usd: float
    calls: int
    error: str | None = None  # why no label came, when a call failed


class ShadowJudge:
    """Makes shadow judgements through `calls`; `prices` per backend for the worst-case estimate."""

    def __init__(self, calls: CallPath, settings: LearnConfig, judge: str, prices: Mapping[str, Price],
                 context_tokens: int | None = None):
        self.calls = calls
        self.settings = settings
        self.judge_name = judge
        self.prices = prices
        self.context_tokens = context_tokens or _CONTEXT_TOKENS

    def worst_case_usd(self, messages: Sequence[Message], other: str, answer_chars: int) -> float:
        """The most one judgement can cost (before it runs): the other tier's answer at its
        max_tokens, then two judge calls reading the question and both answers at theirs."""
        prompt = _tokens(sum(len(str(m.get("content") or "")) for m in messages))
        other_price = self.prices.get(other, Price())
        answer = (other_price.input_per_mtok * prompt + other_price.output_per_mtok * self.settings.max_tokens) / 1e6
        return answer + 2 * self._vote_worst_usd(prompt, answer_chars)

    def _vote_worst_usd(self, prompt: int, answer_chars: int) -> float:
        judge_price = self.prices.get(self.judge_name, Price())
        judge_in = prompt + _tokens(answer_chars) + self.settings.max_tokens + 400  # the instructions, roughly
        return (judge_price.input_per_mtok * judge_in
                + judge_price.output_per_mtok * self.settings.judge_max_tokens) / 1e6  # fmt: skip

    async def judge(self, messages: list[Message], answered: str, pair: Pair, other: str,
                    spent: list[float], allowance: float | None = None) -> Judged:
        """Ask `other` for its answer, then the judge in both orders; each call's cost is
        appended to `spent` as it comes (the caller keeps it if the judgement is cancelled).
        `allowance`: dollars reserved for the whole judgement (its worst case); the judge is not
        asked when the answer's reported usage already cost more than the answer's share of it
        (an upstream may report more tokens than max_tokens asked: reasoning it bills, or a
        server that ignores the limit), so what a judgement spends is bounded by what the calls
        report, not by the estimate alone."""
        deadline = Deadline(self.settings.timeout_s)
        try:
            shadow = await self._call(other, Request(messages=messages, max_tokens=self.settings.max_tokens),
                                      deadline, "the shadow answer", spent)
        except (BackendError, AllBackendsFailed) as exc:
            return Judged(None, (), sum(spent), len(spent), f"{other}: {type(exc).__name__}")
        if not shadow.text.strip():
            return Judged(None, (), sum(spent), len(spent), f"{other} answered nothing")
        prompt = _tokens(sum(len(str(m.get("content") or "")) for m in messages))
        votes_worst = 2 * self._vote_worst_usd(prompt, len(answered))
        if allowance is not None and sum(spent) + votes_worst > allowance * (1 + 1e-9):
            return Judged(None, (), sum(spent), len(spent),
                          f"{other} reported {shadow.usage.output_tokens} output tokens for max_tokens "
                          f"{self.settings.max_tokens} (${sum(spent):.6f}): past the judgement's ${allowance:.6f}, "
                          "so the judge was not asked")
        lower, upper = (answered, shadow.text) if pair.client_is_lower else (shadow.text, answered)
        votes, why = await self._both_orders(messages, lower, upper, deadline, spent)
        return Judged(verdict_label(votes), votes, sum(spent), len(spent), why)

    async def _both_orders(self, messages: list[Message], lower: str, upper: str, deadline: Deadline,
                           spent: list[float]) -> tuple[tuple[int | None, ...], str | None]:
        """(the vote of each order, None where the judge failed; why one failed, if one did)."""
        found = await asyncio.gather(self._vote(messages, lower, upper, deadline, spent, lower_first=True),
                                     self._vote(messages, lower, upper, deadline, spent, lower_first=False),
                                     return_exceptions=True)
        failed = [f for f in found if isinstance(f, BaseException)]
        for problem in failed:
            if not isinstance(problem, (BackendError, AllBackendsFailed)):
                raise problem  # a bug or a cancellation, not a judge that failed
        votes = tuple(None if isinstance(f, BaseException) else f for f in found)
        return votes, f"{self.judge_name}: {type(failed[0]).__name__}" if failed else None

    async def _vote(self, messages: list[Message], lower: str, upper: str, deadline: Deadline, spent: list[float],
                    *, lower_first: bool) -> int | None:
        """+1: the lower tier's answer is better, -1: the upper's, 0: a tie, None: no verdict."""
        candidates = [Candidate(lower, "lower"), Candidate(upper, "upper")]
        if not lower_first:
            candidates.reverse()
        nonce = secrets.token_hex(8)
        prompt = arbiter_prompt(messages, candidates, judging="rank", nonce=nonce,
                                context_tokens=self.context_tokens, reply_tokens=self.settings.judge_max_tokens)
        reply = await self._call(self.judge_name, Request(messages=prompt.messages,
                                                          max_tokens=self.settings.judge_max_tokens),
                                 deadline, "the shadow judge", spent)
        if f"<ranking-{nonce}>" not in reply.text:
            return None  # no verdict this run's nonce vouches for
        best = parse_verdict(reply.text, nonce, 2).ranking[0]
        if len(best) == 2:
            return 0
        lower_index = 0 if lower_first else 1
        return 1 if best[0] == lower_index else -1

    async def _call(self, name: str, request: Request, deadline: Deadline, label: str,
                    spent: list[float]) -> Completion:
        completion = await self.calls.complete(name, request, CallOptions(deadline=deadline, label=label))
        spent.append(completion.cost_usd or 0.0)
        return completion


def _tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN + 1
