"""How each simulated model behaves: timing, answer length, scripted replies and faults.

A profile is plain data, so benchmarks can load one from YAML and change it at runtime through
the control endpoint. Times are seconds; rates are tokens per second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from backends.errors import ConfigError
from backends.simulator.refusals import REFUSAL_STYLES, Refusal
from backends.simulator.tools import Reply, check_reply
from backends.types import Message

__all__ = [
    "DEFAULT_PROFILES",
    "FALLBACK_PROFILE",
    "FAULT_KINDS",
    "SimProfile",
    "load_profiles",
]

# What a request can be made to suffer; None means healthy.
# "echo-key": a 401 that repeats the caller's credential, as some providers do -- for testing
# that the router never lets it out.
FAULT_KINDS = frozenset({"500", "429", "hang", "drop", "malformed", "drip", "echo-key"})

# A responder may return None: "answer this one as the plain simulated model would".
Responder = Callable[[list[Message]], str | None]


@dataclass(frozen=True, slots=True)
class SimProfile:
    """One simulated model.

    Autoregressive: the first token after `ttft_s`, then `tokens_per_s` (None = all at once).
    Diffusion: after `ttft_s`, each canvas of up to `canvas_length` tokens arrives whole after
    `canvas_s`, so a 20-token answer costs as much as a 256-token one.
    `answer_tokens` is the answer length when the request sets no `max_tokens`.
    `thinking_tokens` > 0: generated answers start with a labelled thought of that many words in
    Gemma 4's thinking markers (counted in the output tokens and cut by `max_tokens`, as a real
    model's thinking is); scripted replies are sent as scripted.
    `fault_rate` spreads faults evenly: 0.25 fails requests 4, 8, 12...; 1.0 fails every one.
    `prompt_cache_ttl_s` > 0: a prompt prefix this model saw that recently is reported as cached
    tokens, as a provider's prompt cache bills it (simulator/prompt_cache.py).
    `signed_thinking`: the Anthropic endpoint enforces Anthropic's rule for thinking in tool loops
    (a thinking block it did not sign, or a tool-use turn sent back without the signed thinking it
    came with while thinking is on, is Anthropic's 400: simulator/thinking.py). Its answers are
    signed whatever this says, and its thought is `thinking_tokens` words (12 when that is 0).
    `refuses`: request fields it refuses as its provider would (`refusal`: "provider", or a
    LiteLLM proxy's 401 "Rejected Request"; simulator/refusals.py).
    """

    ttft_s: float = 0.0
    tokens_per_s: float | None = None
    decoding: Literal["autoregressive", "diffusion"] = "autoregressive"
    canvas_s: float = 0.0
    canvas_length: int = 256
    answer_tokens: int = 40
    thinking_tokens: int = 0
    fault: str | None = None
    fault_rate: float = 1.0
    retry_after_s: float = 1.0
    drip_interval_s: float = 0.2
    # Stream tokens due within this many seconds of each other in one event (a server's decode
    # step; lets time-scaled benchmarks keep a real event rate). 0: each token when due.
    stream_interval_s: float = 0.0
    prompt_cache_ttl_s: float = 0.0
    signed_thinking: bool = False
    refuses: tuple[str, ...] = ()
    refusal: Refusal = "provider"
    replies: tuple[Reply, ...] | None = None  # a string, or {content, tool_calls: [{name, arguments}]}
    # In-process only (not serialisable): wins over `replies`.
    responder: Responder | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._check_ranges()
        if self.fault is not None:
            object.__setattr__(self, "fault", str(self.fault))  # YAML may hand us 500 as an int
        if self.refusal not in REFUSAL_STYLES or isinstance(self.refuses, str):
            raise ConfigError(f"refuses is a list of field names; refusal one of {sorted(REFUSAL_STYLES)}")
        object.__setattr__(self, "refuses", tuple(str(f) for f in self.refuses))  # JSON hands us a list
        if self.replies is not None:
            object.__setattr__(self, "replies", _checked_replies(self.replies))

    def _check_ranges(self) -> None:
        if self.fault is not None and str(self.fault) not in FAULT_KINDS:
            raise ConfigError(f"unknown fault {self.fault!r}; expected one of {sorted(FAULT_KINDS)}")
        if self.decoding not in ("autoregressive", "diffusion"):
            raise ConfigError(f"unknown decoding {self.decoding!r}")
        if self.canvas_length < 1 or self.answer_tokens < 0 or self.thinking_tokens < 0 or not 0 <= self.fault_rate <= 1:
            raise ConfigError("canvas_length >= 1, answer_tokens >= 0, thinking_tokens >= 0, 0 <= fault_rate <= 1")

    def updated(self, **changes: Any) -> SimProfile:
        """A copy with `changes`; unknown field names are a ConfigError."""
        unknown = set(changes) - _FIELD_NAMES
        if unknown:
            raise ConfigError(f"unknown profile fields: {sorted(unknown)}")
        return replace(self, **changes)

    def first_token_s(self) -> float:
        """Seconds from request to the first content."""
        return self.ttft_s + (self.canvas_s if self.decoding == "diffusion" else 0.0)

    def arrival_s(self, index: int) -> float:
        """Seconds from request to the arrival of token `index` (0-based)."""
        if self.decoding == "diffusion":
            return self.ttft_s + (index // self.canvas_length + 1) * self.canvas_s
        if not self.tokens_per_s:
            return self.ttft_s
        return self.ttft_s + index / self.tokens_per_s

    def total_s(self, tokens: int) -> float:
        """Seconds to produce a whole answer of `tokens` tokens (at least one canvas)."""
        if self.decoding == "diffusion":
            return self.ttft_s + max(1, math.ceil(tokens / self.canvas_length)) * self.canvas_s
        return self.arrival_s(max(0, tokens - 1))

    def faults_request(self, number: int) -> str | None:
        """The profile's fault for this model's `number`-th request (1-based), or None."""
        if self.fault is None or self.fault_rate <= 0:
            return None
        hit = math.floor(number * self.fault_rate) > math.floor((number - 1) * self.fault_rate)
        return self.fault if hit else None


_FIELD_NAMES = frozenset(f.name for f in fields(SimProfile))

# Answers any model name not in the profile set, so any config can point at the simulator.
FALLBACK_PROFILE = SimProfile(ttft_s=0.0, tokens_per_s=None, answer_tokens=40)

# Timings are rough public figures at batch 1, enough to make routing decisions meaningful.
DEFAULT_PROFILES: Mapping[str, SimProfile] = {
    # Local DiffusionGemma on one GPU: a 256-token canvas per ~0.25 s.
    "google/diffusiongemma-26B-A4B-it": SimProfile(
        ttft_s=0.03, decoding="diffusion", canvas_s=0.25, answer_tokens=120
    ),
    # Inception's hosted diffusion model: network round trip, then very fast canvases.
    "mercury-2": SimProfile(ttft_s=0.15, decoding="diffusion", canvas_s=0.12, answer_tokens=120),
    # Hosted autoregressive frontier models.
    "claude-sonnet-4-5": SimProfile(ttft_s=0.8, tokens_per_s=60.0, answer_tokens=160),
    "gpt-5": SimProfile(ttft_s=1.2, tokens_per_s=70.0, answer_tokens=160),
    "glm-5.2": SimProfile(ttft_s=0.6, tokens_per_s=90.0, answer_tokens=140),
    "k2.6": SimProfile(ttft_s=0.5, tokens_per_s=100.0, answer_tokens=140),
    # A small local autoregressive model of the diffusion model's class, for comparisons.
    "gemma-3-27b-it": SimProfile(ttft_s=0.1, tokens_per_s=45.0, answer_tokens=120),
}


def _checked_replies(replies: Any) -> tuple[Reply, ...]:
    if isinstance(replies, (str, Mapping)):
        raise ConfigError("replies must be a list (of strings or {content, tool_calls} objects)")
    problem = next((p for p in map(check_reply, replies) if p), None)
    if problem:
        raise ConfigError(f"replies: {problem}")
    return tuple(replies)


def load_profiles(source: str | Path | Mapping[str, Any]) -> dict[str, SimProfile]:
    """Profiles from a YAML file or a dict `{model: {field: value}}`.

    A top-level `profiles:` key is accepted too, so the file can hold other settings.
    Values may already be SimProfile instances (handy in tests with a `responder`).
    """
    data: Any = source
    where: str | None = None
    if isinstance(source, (str, Path)):
        where = str(source)
        data = _read_yaml(Path(source))
    if isinstance(data, Mapping) and isinstance(data.get("profiles"), Mapping):
        data = data["profiles"]
    if not isinstance(data, Mapping):
        raise ConfigError("profiles must be a mapping of model name to settings", path=where)
    profiles: dict[str, SimProfile] = {}
    for model, spec in data.items():
        if isinstance(spec, SimProfile):
            profiles[str(model)] = spec
        elif isinstance(spec, Mapping):
            try:
                profiles[str(model)] = SimProfile().updated(**spec)
            except (ConfigError, TypeError) as exc:
                raise ConfigError(f"profile {model!r}: {exc}", path=where) from exc
        else:
            raise ConfigError(f"profile {model!r} must be a mapping", path=where)
    return profiles


def _read_yaml(path: Path) -> Any:
    import yaml  # only the CLI path reads files; keep module import cheap

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read profiles: {exc.strerror}", path=str(path)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"invalid YAML: {exc}", path=str(path), line=line) from exc
