"""The `consortia:` config schema: members, arbiter, judging, iterations, quorum, budget.

A member is written in one of two forms:

    members:
      - glm-5.2*5                      # short form: NAME or NAME*N (N samples of NAME)
      - {model: k2.6, n: 3, system: "Be terse.", temperature: 0.9}   # long form

`*` separates the count because names may contain colons (`llama3:8b`) and dots
(`glm-5.2`) but never `*`. NAME is any backend or consortium name from the same config.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_BUDGET", "ConsortiumConfig", "MemberSpec", "parse_member"]

_SHORT = re.compile(r"^(?P<name>[^*\s](?:[^*]*[^*\s])?)\s*(?:\*\s*(?P<n>\d+))?$")
MAX_SAMPLES = 64  # per member entry; more is almost certainly a typo (and a bill)
# Upstream requests one run may make when `budget:` is unset, retries included. Large enough for
# the usual panels (the README's nested example plans 26 calls at most) with room for retries;
# small enough that a typo like `*64` at three levels is refused at load, not billed.
DEFAULT_BUDGET = 64


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class MemberSpec(_Strict):
    """One member entry: `n` samples of the backend or consortium called `model`."""

    model: str = Field(min_length=1, description="a backend or consortium of the same config")
    n: int = Field(1, ge=1, le=MAX_SAMPLES, description=f"samples of it per round, 1..{MAX_SAMPLES} "
                   "(the short form's `*N`)")
    system: str | None = Field(None, description="its own system prompt, instead of the consortium's `system`")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="its sampling temperature, 0..2; "
                                      "default: the request's")

    def short(self) -> str:
        """The short form when it says everything, else a compact long form (for display)."""
        base = self.model if self.n == 1 else f"{self.model}*{self.n}"
        extras = [f"temperature={self.temperature:g}"] if self.temperature is not None else []
        if self.system:
            extras.append("system=…")
        return f"{base} ({', '.join(extras)})" if extras else base


def parse_member(value: Any) -> Any:
    """Short form `NAME` / `NAME*N` to the long form's dict; dicts pass through to the schema."""
    if not isinstance(value, str):
        return value
    match = _SHORT.match(value.strip())
    if not match:
        raise ValueError(
            f"member {value!r} is not `NAME` or `NAME*N` (N samples, e.g. `glm-5.2*5`); "
            "or write the long form {model: NAME, n: N}"
        )
    n = int(match.group("n") or 1)
    if not 1 <= n <= MAX_SAMPLES:
        raise ValueError(f"member {value!r}: the sample count must be 1..{MAX_SAMPLES}")
    return {"model": match.group("name"), "n": n}


class ConsortiumConfig(_Strict):
    """One named consortium. Times are seconds; `budget` counts model calls of the whole
    nested run (this consortium's members, arbiter and every consortium inside them)."""

    members: list[MemberSpec] = Field(min_length=1, description="who answers, all at once: `NAME` or `NAME*N` "
                                      "(N samples), or the long form below; NAME is a backend or a consortium")
    arbiter: str = Field(min_length=1, description="the backend or consortium that judges the answers")
    judging: Literal["rank", "synthesis"] = Field("rank", description="`rank`: the best answer is returned "
                                                  "verbatim; `synthesis`: the arbiter writes one from them all")
    system: str | None = Field(None, description="system prompt for every member without its own")
    confidence_threshold: float = Field(0.8, ge=0.0, le=1.0, description="another round (up to `max_iterations`) "
                                        "while the arbiter's confidence is below this, 0..1")
    min_iterations: int = Field(1, ge=1, le=10, description="rounds always run, 1..10")
    max_iterations: int = Field(1, ge=1, le=10, description="most rounds, 1..10; a later round asks the members to "
                                "refine the last answer where the arbiter said")
    member_timeout_s: float = Field(120.0, gt=0, description="seconds one attempt of a member may take; then it "
                                    "fails, and `retries` may try it again")
    retries: int = Field(1, ge=0, le=5, description="extra attempts for a member that failed")
    quorum: int | None = Field(None, ge=1, description="answers that are enough; default: every member")
    grace_s: float = Field(0.0, ge=0, description="after the quorum, wait this long for the rest")
    max_concurrency: int = Field(8, ge=1, le=256, description="member calls in flight at once, nested "
                                 "consortia included")
    budget: int | None = Field(None, ge=1, description="most upstream requests (retries included) for the "
                               f"whole nested run; default {DEFAULT_BUDGET}")
    complexity_budget: float | None = Field(
        None, gt=1.0, description="reject a candidate whose code is this many times more complex than the median"
    )
    arbiter_context_tokens: int | None = Field(None, ge=512, description="tokens the arbiter's prompt may fill (answers "
                                                  "beyond it are cut); default: the arbiter's context_window")
    arbiter_max_tokens: int = Field(1024, ge=16, description="room kept in the arbiter's context for its reply")

    @field_validator("members", mode="before")
    @classmethod
    def _short_forms(cls, value: Any) -> Any:
        if isinstance(value, (str, dict)):
            value = [value]  # `members: glm-5.2*5` is one member, not a list of characters
        if not isinstance(value, list):
            return value
        return [parse_member(v) for v in value]

    @model_validator(mode="after")
    def _consistent(self) -> ConsortiumConfig:
        if self.max_iterations < self.min_iterations:
            raise ValueError(
                f"max_iterations ({self.max_iterations}) is below min_iterations ({self.min_iterations})"
            )
        if self.quorum is not None and self.quorum > self.size:
            raise ValueError(f"quorum {self.quorum} exceeds the {self.size} member samples; lower it")
        return self

    @property
    def effective_budget(self) -> int:
        return DEFAULT_BUDGET if self.budget is None else self.budget

    @property
    def size(self) -> int:
        """Member calls per round (samples counted)."""
        return sum(m.n for m in self.members)

    def names(self) -> list[str]:
        """Every name this consortium refers to: members, then the arbiter."""
        return [*(m.model for m in self.members), self.arbiter]
