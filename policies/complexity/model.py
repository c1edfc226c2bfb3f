"""The learned complexity scorer: logistic regression over hand-designed features and words.

    logit = bias + sum_i w_i * (x_i - mean_i)        (i over FEATURES and the two vocabulary terms)
    value = sigmoid(logit)

where "vocabulary" is the mean learned weight of the prompt's words (0 for unknown words) and
"vocabulary_exam" the same value less its training mean, for a prompt offering lettered answer
choices (0 otherwise, so it moves no other prompt).
Each vocabulary term is clipped to +-`vocabulary_cap` logits: words learned from a few
benchmarks may refine the score of a prompt but never outvote its structure and the general
word lists. The exam term lets the words weigh more where they were shown to work (subject
knowledge decides exam questions) without leaking into chat, code or writing prompts.

Features are centred on their training means, so `Score.base` (the sigmoid of the bias) is the
score of a typical training prompt and each contribution says how far that feature moved
this prompt from typical. The sigmoid's change is shared out over the logit contributions in
proportion to them, which keeps `base + sum(contributions) == value` exact.

Weights adapted to a deployment's own traffic (`training/adapt.py`) may add a third term, the
domain value: the mean learned weight of the prompt's hashed words and word pairs
(`domain.py`), already in logits; its explanation part is named `domain`.

Weights live in a small JSON file (`weights.json` beside this module by default) written by
`policies.complexity.training.fit` or `route calibrate`; loading one takes a few milliseconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import mul, sub
from pathlib import Path
from typing import Any

from backends.types import Message, content_text
from policies.complexity.domain import BUCKETS, domain_value, tokens
from policies.complexity.features import (
    FEATURES,
    HISTORY_TURNS,
    NON_LATIN,
    SCRIPT_BOUND,
    extract,
)
from policies.scoring import Score

__all__ = [
    "DEFAULT_WEIGHTS",
    "DOMAIN",
    "EXAM_VOCABULARY",
    "MODEL_FEATURES",
    "VOCABULARY",
    "ComplexityScorer",
    "Weights",
    "split_conversation",
    "vocabulary_value",
]

DEFAULT_WEIGHTS = Path(__file__).with_name("weights.json")
FORMAT = "latency-router/complexity-weights"
VOCABULARY = "vocabulary"  # the feature holding the mean learned word weight
EXAM_VOCABULARY = "vocabulary_exam"  # the same, in prompts that offer lettered choices (else 0)
MODEL_FEATURES: tuple[str, ...] = (*FEATURES, VOCABULARY, EXAM_VOCABULARY)
DOMAIN = "domain"  # the explanation's name for the hashed domain vocabulary's part of the logit
_NAMES = (*MODEL_FEATURES, DOMAIN)  # an explanation's keys, in order
_CHOICES = FEATURES.index("choices")
_LOGIT_CAP = 30.0  # keeps exp() finite; sigmoid(30) = 1 - 1e-13


@dataclass(frozen=True, slots=True)
class Weights:
    """Everything a scorer needs, as stored in a weights file."""

    bias: float
    weights: dict[str, float]
    means: dict[str, float]
    vocabulary: dict[str, float] = field(default_factory=dict)
    vocabulary_cap: float = _LOGIT_CAP
    threshold: float | None = None
    hosted_share: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    domain: dict[int, float] = field(default_factory=dict)  # hash bucket -> logit weight (domain.py)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Weights:
        """Read a weights file; unknown feature names are ignored, missing ones weigh 0."""
        where = path or DEFAULT_WEIGHTS
        return cls.from_json(json.loads(Path(where).read_text(encoding="utf-8")), str(where))

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "weights") -> Weights:
        """The weights a file's JSON holds (`to_json`'s inverse); `where` names it in errors."""
        if data.get("format") != FORMAT:
            raise ValueError(f"{where}: not a complexity weights file (format {data.get('format')!r})")
        feats = data["features"]
        domain = data.get("domain") or {}
        if domain and domain.get("buckets") != BUCKETS:
            raise ValueError(f"{where}: domain vocabulary hashed into {domain.get('buckets')} buckets, expected {BUCKETS}")
        return cls(
            bias=float(data["bias"]),
            weights={k: float(v["weight"]) for k, v in feats.items()},
            means={k: float(v["mean"]) for k, v in feats.items()},
            vocabulary={k: float(v) for k, v in data.get("vocabulary", {}).items()},
            vocabulary_cap=float(data.get("vocabulary_cap", _LOGIT_CAP)),
            threshold=data.get("threshold"),
            hosted_share=data.get("hosted_share"),
            metadata=data.get("metadata", {}),
            domain={int(k): float(v) for k, v in (domain.get("weights") or {}).items()},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT,
            "version": 1,
            "bias": self.bias,
            "threshold": self.threshold,
            "hosted_share": self.hosted_share,
            "features": {
                k: {"weight": self.weights.get(k, 0.0), "mean": self.means.get(k, 0.0)}
                for k in MODEL_FEATURES
            },
            "vocabulary_cap": self.vocabulary_cap,
            "vocabulary": dict(sorted(self.vocabulary.items())),
            "metadata": self.metadata,
        }
        if self.domain:
            out["domain"] = {"buckets": BUCKETS, "weights": {str(k): v for k, v in sorted(self.domain.items())}}
        return out

    def save(self, path: str | Path) -> None:
        text = json.dumps(self.to_json(), indent=1, ensure_ascii=False)
        Path(path).write_text(text + "\n", encoding="utf-8")


def split_conversation(messages: list[Message]) -> tuple[str, int, int]:
    """(text of the last user turn, earlier messages counted, their characters).

    Every message other than that turn is context (system prompt, earlier turns, tool
    output), looked at up to `HISTORY_TURNS` back.
    """
    if len(messages) == 1:  # the common case, kept cheap
        m = messages[0]
        return (content_text(m.get("content")), 0, 0) if m.get("role") == "user" else ("", 0, 0)
    last = None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            last = i
            break
    if last is None:
        return "", 0, 0
    text = content_text(messages[last].get("content"))
    others = [m for j, m in enumerate(messages) if j != last][-HISTORY_TURNS:]
    chars = sum(len(content_text(m.get("content"))) for m in others)
    return text, len(others), chars


def vocabulary_value(words: list[str], weight_of: Callable[[str, float], float]) -> float:
    """Mean weight of `words` (`weight_of` is a table's `get`); 0 for no words."""
    return sum(map(weight_of, words, repeat(0.0))) / len(words) if words else 0.0


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


class ComplexityScorer:
    """Scores how much a prompt needs the hosted model; see the module docstring."""

    name = "learned"

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.threshold: float | None = weights.threshold
        self._w = [weights.weights.get(k, 0.0) for k in MODEL_FEATURES]
        self._m = [weights.means.get(k, 0.0) for k in MODEL_FEATURES]
        self._vget = weights.vocabulary.get
        self._cap = weights.vocabulary_cap
        self._vmean = weights.means.get(VOCABULARY, 0.0)
        self._m[-1] = 0.0  # the exam term is centred by construction
        self._bias = weights.bias
        self._base = _sigmoid(weights.bias)
        # A decision needs only the logit: sum(w * x) in C less the constant sum(w * mean), equal
        # to the bias plus the sum of the explanation's parts up to rounding (~1e-16); the
        # parts themselves are built only when someone reads the explanation.
        n = len(FEATURES)
        self._wf = self._w[:n]
        self._offset = weights.bias - sum(map(mul, self._wf, self._m[:n]))
        self._has_vocabulary = bool(weights.vocabulary)
        self._dget = weights.domain.get
        self._has_domain = bool(weights.domain)
        self._needs_words = self._has_vocabulary or self._has_domain
        self._vocabulary_weighs = self._w[-2] != 0.0 or self._w[-1] != 0.0  # else both parts are 0

    @classmethod
    def load(cls, path: str | Path | None = None, **unknown: Any) -> ComplexityScorer:
        """The scorer for a weights file; the shipped default when `path` is None."""
        if unknown:
            raise ValueError(f"unknown option(s) for the learned scorer: {sorted(unknown)}; known: weights")
        return cls(Weights.load(path))

    def _decide(self, text: str, history_turns: int, history_chars: int) -> tuple[list[float], float]:
        """(feature values in MODEL_FEATURES order as the model reads them, then the domain
        part of the logit when the weights have one; the score)."""
        values, words = extract(text, history_turns, history_chars, self._needs_words)
        m = self._m
        if values[NON_LATIN] >= 0.5:  # features only Latin script shows: read as typical
            for i in SCRIPT_BOUND:
                values[i] = m[i]
        # an empty table (the shipped recipe learns no words) gives 0 without reading the words
        vocab = sum(map(self._vget, words, repeat(0.0))) / len(words) if words and self._has_vocabulary else 0.0
        exam = (vocab - self._vmean) * values[_CHOICES]  # exam term: 0 off exams
        values += (vocab, exam)
        logit = self._offset + sum(map(mul, self._wf, values))
        if self._vocabulary_weighs:
            w, cap = self._w, self._cap
            logit += max(-cap, min(cap, w[-2] * (vocab - m[-2]))) + max(-cap, min(cap, w[-1] * exam))
        if self._has_domain:
            part = domain_value(tokens(words), self._dget)
            values.append(part)
            logit += part
        if logit > _LOGIT_CAP:
            logit = _LOGIT_CAP
        elif logit < -_LOGIT_CAP:
            logit = -_LOGIT_CAP
        return values, 1.0 / (1.0 + math.exp(-logit))

    def _parts(self, values: list[float]) -> list[float]:
        """Each feature's part of the logit: the logit is the bias plus their sum."""
        parts = list(map(mul, self._w, map(sub, values, self._m)))  # w * (x - m), in C: once per logged request
        cap = self._cap
        parts[-2] = max(-cap, min(cap, parts[-2]))  # the vocabulary terms
        parts[-1] = max(-cap, min(cap, parts[-1]))
        return parts + values[len(MODEL_FEATURES):]  # the domain part is a logit already

    def feature_values(self, text: str, history_turns: int = 0, history_chars: int = 0) -> tuple[list[float], list[float]]:
        """(feature values in MODEL_FEATURES order as the model reads them, their logit parts)."""
        values, _ = self._decide(text, history_turns, history_chars)
        return values, self._parts(values)

    def score_text(self, text: str, history_turns: int = 0, history_chars: int = 0) -> float:
        """The score alone, for bulk scoring (no explanation built)."""
        return self._decide(text, history_turns, history_chars)[1]

    def score(self, messages: list[Message]) -> Score:
        """Score the last user turn, with the rest of the conversation as context."""
        first = messages[0] if len(messages) == 1 else None
        content = first.get("content") if first is not None and first.get("role") == "user" else None
        if isinstance(content, str):  # one plain user message, the common case: no call
            values, value = self._decide(content, 0, 0)
        else:
            values, value = self._decide(*split_conversation(messages))
        base = self._base

        def explain() -> tuple[dict[str, float], dict[str, float]]:
            # Share the sigmoid's change over the logit parts in proportion; when they cancel
            # out the ratio tends to the sigmoid's slope at the base.
            parts = self._parts(values)
            delta = sum(parts)
            ratio = (value - base) / delta if abs(delta) > 1e-12 else base * (1.0 - base)
            return dict(zip(_NAMES, map(mul, parts, repeat(ratio)))), dict(zip(_NAMES, values))

        return Score(value, base, None, None, self.name, explain)
