"""The record of a consortium run: every member answer, each arbiter decision, timings, tokens,
cost and calls. Plain dataclasses that turn into JSON-able dicts (`Completion.metadata["trace"]`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backends.types import Completion, Usage

__all__ = ["OUT_OF_TIME", "ArbiterRecord", "MemberRecord", "RoundRecord", "add_usage", "completion_facts"]

# The note of a member still needed when its consortium's deadline passed (status "failed").
OUT_OF_TIME = "the consortium's deadline passed before this member answered"


def add_usage(a: Usage, b: Usage) -> Usage:
    return a + b


def completion_facts(c: Completion) -> dict[str, Any]:
    return {
        "backend": c.backend,
        "model": c.model,
        "tokens": {"input": c.usage.input_tokens, "output": c.usage.output_tokens},
        "cost_usd": c.cost_usd,
        "ttft_s": c.timings.ttft_s,
        "total_s": c.timings.total_s,
        "finish_reason": c.finish_reason,
    }


@dataclass
class MemberRecord:
    """One member sample in one round. `status`: waiting, running, streaming, done, failed (its
    calls failed, or it was still needed when the deadline passed: OUT_OF_TIME), cancelled (the
    quorum was met first) or rejected (over the complexity budget)."""

    member: str
    sample: int  # 1-based among this member entry's samples
    status: str = "waiting"
    attempts: list[dict[str, Any]] = field(default_factory=list)  # one per failed attempt
    completion: Completion | None = None
    started_s: float | None = None  # seconds since the run began
    latency_s: float | None = None  # seconds from the successful attempt's start to its end
    streamed_tokens: int = 0
    note: str | None = None

    @property
    def label(self) -> str:
        return f"{self.member}#{self.sample}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "member": self.member, "sample": self.sample, "status": self.status,
            "started_s": self.started_s, "latency_s": self.latency_s, "attempts": self.attempts,
        }
        if self.note:
            out["note"] = self.note
        c = self.completion
        if c is not None:
            out["text"] = c.text
            out.update(completion_facts(c))
            if "trace" in c.metadata:
                out["trace"] = c.metadata["trace"]
        return out


@dataclass
class ArbiterRecord:
    arbiter: str
    status: str = "waiting"  # waiting, running, done, failed, skipped
    prompt_chars: int = 0
    truncated: dict[int, tuple[int, int]] = field(default_factory=dict)
    completion: Completion | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    order: list[str] = field(default_factory=list)  # candidate labels, best first
    fallback: str | None = None  # why the outcome did not come from a well-formed reply
    latency_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "arbiter": self.arbiter, "status": self.status, "prompt_chars": self.prompt_chars,
            "truncated": {str(i + 1): {"original_chars": o, "kept_chars": k} for i, (o, k) in self.truncated.items()},
            "errors": self.errors, "verdict": self.verdict, "order": self.order,
            "fallback": self.fallback, "latency_s": self.latency_s,
        }
        if self.completion is not None:
            out["reply"] = self.completion.text
            out.update(completion_facts(self.completion))
            if "trace" in self.completion.metadata:
                out["trace"] = self.completion.metadata["trace"]
        return out


@dataclass
class RoundRecord:
    iteration: int
    members: list[MemberRecord]
    arbiter: ArbiterRecord | None = None
    rejected: dict[str, str] = field(default_factory=dict)  # label -> why (complexity budget)
    answer: str | None = None
    confidence: float | None = None
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "members": [m.as_dict() for m in self.members],
            "rejected": self.rejected,
            "arbiter": self.arbiter.as_dict() if self.arbiter else None,
            "answer": self.answer,
            "confidence": self.confidence,
            "wall_s": self.wall_s,
        }
