"""What the router decided for a request, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from backends.errors import BackendError
from backends.types import Completion
from policies.ladder import Crossing
from policies.scoring import Score
from policies.selection import Plan
from policies.task import Task
from policies.template import Sample

if TYPE_CHECKING:
    from router.sessions import SessionPlan

__all__ = ["Attempt", "Decision", "Downgrade", "Outcome", "RouteResult", "Watch"]


@dataclass(frozen=True, slots=True)
class Downgrade:
    """A prompt scored for one tier was answered by a backend of a weaker tier, and why: the
    policy planned it (`on_deadline_risk: downgrade`), or every backend at the prompt's quality
    failed first (`planned` False)."""

    from_tier: str
    to_tier: str
    backend: str
    reason: str
    planned: bool

    def as_dict(self) -> dict[str, Any]:
        return {"from_tier": self.from_tier, "to_tier": self.to_tier, "backend": self.backend,
                "reason": self.reason, "planned": self.planned}

    def header(self) -> str:
        """The value of the server's `x-route-downgraded` header."""
        return f"{self.from_tier}->{self.to_tier}"


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Decision:
    """What to try and why: the policy's typed `plan` (candidates in order, with predictions),
    the score and tier behind it. The executor consumes the plan; --explain, --json and the
    server's headers render it."""

    plan: Plan
    reason: str
    score: Score | None = None
    tier: str | None = None
    forced: bool = False
    deadline_s: float | None = None
    crossings: tuple[Crossing, ...] = ()  # the tier boundaries looked at, the deciding one last
    session: SessionPlan | None = None  # the task this call belongs to, and what it made of the call
    version: int = 0  # the routing model version that decided (0: the configured weights)
    task: Task | None = None  # what was scored: the user's words, the client's harness set aside
    lesson: Sample | None = None  # what the client's template may learn from this request, once answered

    @property
    def candidates(self) -> tuple[str, ...]:
        return self.plan.names

    @property
    def chosen(self) -> str:
        return self.candidates[0]

    @property
    def details(self) -> dict[str, Any]:
        """The plan for display: per-candidate predictions, rounded."""
        return self.plan.as_dict()

    def downgrade_to(self, backend: str) -> Downgrade | None:
        """The Downgrade if `backend` answering this decision is one, else None."""
        candidate = self.plan.candidate(backend)
        if candidate is None or not candidate.weaker or self.tier is None:
            return None
        planned = backend == self.chosen and self.plan.downgrade is not None
        reason = self.plan.downgrade if planned and self.plan.downgrade else (
            f"every backend of tier {self.tier!r} and above failed or ran out of time first")
        return Downgrade(self.tier, candidate.tier or "-", backend, reason, planned)

    @property
    def downgrade(self) -> Downgrade | None:
        """The planned downgrade: the first candidate is from a weaker tier."""
        return self.downgrade_to(self.chosen) if self.plan.downgrade is not None else None

    def without_texts(self) -> Decision:
        """This decision without the conversation's texts (what a list of past requests keeps):
        the task's lengths, the session's digests and counts stay."""
        task = self.task.forgotten() if self.task is not None else None
        session = self.session.without_texts() if self.session is not None else None
        return replace(self, task=task, session=session)

    def without_conversation(self) -> Decision:
        """This decision without its task and session plan, which hold the conversation as the
        client sent it (what a queued log record keeps; the session's few fields are taken apart).
        Built field by field: `replace` looks each field up by name, once per request here."""
        return Decision(self.plan, self.reason, self.score, self.tier, self.forced, self.deadline_s, self.crossings,
                        None, self.version, None)

    def as_dict(self, *, task: bool = False) -> dict[str, Any]:
        """The decision as `--json`, the log and the web view show it; `task` adds what was
        scored and what was set aside (a pass over the whole conversation: asked for by
        `--explain` and the web view, not by every request's log record)."""
        names = self.plan.names
        out: dict[str, Any] = {
            "chosen": names[0],
            "candidates": list(names),
            "reason": self.reason,
            "tier": self.tier,
            "forced": self.forced,
            "deadline_s": self.deadline_s,
            "version": self.version,
        }
        downgrade = self.downgrade
        if downgrade is not None:
            out["downgrade"] = downgrade.as_dict()
        if self.score is not None:
            out["score"] = round(self.score.value, 6)
            out["scorer"] = self.score.scorer
            out["top_features"] = {name: round(c, 6) for name, c in self.score.top(5)}
        if self.crossings:
            out["boundaries"] = [c.as_dict() for c in self.crossings]
        if self.session is not None:
            out["session"] = self.session.as_dict()
        details = self.details  # built once: it renders every candidate
        if details:
            out["details"] = details
        if task and self.task is not None:
            out["task"] = self.task.explain()
        return out


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Attempt:
    """One call to one backend, successful or not; handed to observers (latency model, log)."""

    backend: str
    elapsed_s: float
    completion: Completion | None = None
    error: BackendError | None = None
    streamed: bool = False
    # A hedged attempt that lost the race and was cancelled (error says so); not the backend's fault.
    cancelled: bool = False
    first_s: float | None = None  # a failed or cancelled stream's time to its first chunk, if one came


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class RouteResult:
    completion: Completion
    decision: Decision
    failures: tuple[BackendError, ...] = ()
    # Set when a weaker tier than the prompt's answered (planned, or after failures). Found once:
    # the answer's headers, the request log and the web view each read it.
    downgrade: Downgrade | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.downgrade = self.decision.downgrade_to(self.completion.backend)

    @property
    def text(self) -> str:
        return self.completion.text

    @property
    def backend(self) -> str:
        return self.completion.backend

    @property
    def downgrade_note(self) -> str | None:
        """One sentence saying that a weaker tier answered, what failed first and who answered
        instead (the CLI prints it on stderr, even with -q); None when there was no downgrade."""
        downgrade = self.downgrade
        if downgrade is None:
            return None
        answered = f"{downgrade.backend} (tier {downgrade.to_tier!r}) answered instead of tier {downgrade.from_tier!r}"
        failed = _failed_backends(self.failures)
        if downgrade.planned or not failed:
            return f"downgraded: {answered}: {downgrade.reason}"
        return f"downgraded: {failed} failed, so {answered}"

    def as_dict(self) -> dict[str, Any]:
        c = self.completion
        downgrade = self.downgrade
        out: dict[str, Any] = {
            "text": c.text,
            "backend": c.backend,
            "model": c.model,
            "finish_reason": c.finish_reason,
            "usage": {"input_tokens": c.usage.input_tokens, "output_tokens": c.usage.output_tokens},
            "timings": {"ttft_s": c.timings.ttft_s, "total_s": c.timings.total_s, "decode_tps": c.timings.decode_tps},
            "cost_usd": c.cost_usd,
            "simulated": bool(c.metadata.get("simulated")),
            "decision": self.decision.as_dict(),
            "downgraded": {**downgrade.as_dict(), "note": self.downgrade_note} if downgrade is not None else None,
            "failures": [{"backend": e.backend, "error": type(e).__name__, "message": str(e)} for e in self.failures],
        }
        if c.diffusion is not None:
            out["diffusion"] = {
                "canvases": c.diffusion.canvases,
                "denoising_steps": c.diffusion.denoising_steps,
                "tokens_per_forward": c.diffusion.tokens_per_forward,
            }
        if c.thinking:  # apart from `text`, as `reasoning_content` is apart from `content`
            out["thinking"] = c.thinking
            out["usage"]["thinking_tokens"] = c.usage.thinking_tokens
        if c.tool_calls:
            out["tool_calls"] = c.tool_calls
        extra = {k: v for k, v in c.metadata.items() if k not in ("simulated",)}
        if extra:
            out["metadata"] = extra
        return out


def _failed_backends(failures: tuple[BackendError, ...]) -> str:
    """"a (AuthError) and b (BackendTimeout)": each backend once, with its first error's type."""
    first: dict[str, str] = {}
    for error in failures:
        first.setdefault(error.backend or "?", type(error).__name__)
    named = [f"{name} ({kind})" for name, kind in first.items()]
    if len(named) < 2:
        return "".join(named)
    return ", ".join(named[:-1]) + f" and {named[-1]}"


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Outcome:
    """The end of one routed request, success or failure; handed to request observers (the log).

    `source` says who asked (cli, api, server); `elapsed_s` is wall time for the whole request,
    fallbacks included."""

    decision: Decision
    messages: list
    source: str
    elapsed_s: float
    result: RouteResult | None = None
    error: BaseException | None = None  # CancelledError too: a caller that gave up is an outcome


class Watch(Protocol):
    """What the entry point that sends a request observes of it, beside the router's own
    observers (the request log, learning, latency): every upstream attempt made for it --
    routed, consortium member, arbiter, retries -- as it ends, each backend passed over at its
    rate limit, then its outcome. The server's
    metrics and web view watch the requests it serves this way (router/server/metrics.py `Served`), so
    nothing is registered on a router after it is built."""

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None: ...

    def refused(self, backend: str) -> None: ...

    def finished(self, outcome: Outcome) -> None: ...
