"""Pure helpers for judging consortium candidates: code metrics, the arbiter's reply, ranking.

No I/O and no clock. Code metrics come from radon (cyclomatic complexity, Halstead, the
maintainability index, line counts) for each fenced code block in a candidate; the arbiter sees
them, `rank` uses them to break ties (among equally good answers the simpler code wins), and
`over_budget` finds candidates whose code is far more complex than their siblings'.

The arbiter answers in tags that carry a per-run random nonce (`<ranking-NONCE>`), so text that
a candidate wrote cannot pose as the arbiter's verdict. `parse_verdict` reads only those tags:
a reply without them is read as no verdict (every candidate tied, no confidence), never from
nonce-less tags or `Ranking:` lines, which an arbiter quoting a candidate would repeat. What
was missing is said in `Verdict.notes`.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from policies.radon_metrics import analyse

__all__ = [
    "CodeMetrics",
    "Verdict",
    "code_blocks",
    "code_metrics",
    "order_candidates",
    "over_budget",
    "parse_verdict",
    "read_confidence",
]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+#.-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON = {"", "python", "py", "python3"}


@dataclass(frozen=True, slots=True)
class CodeMetrics:
    """Metrics of all code in one candidate. `parsed` is False when radon could not read it
    (not Python, or broken): then only the line count is known."""

    blocks: int
    lines: int  # source lines of code (radon's sloc), or non-blank lines when unparsed
    parsed: bool
    cyclomatic: int | None = None  # summed over functions, methods and module level
    halstead_volume: float | None = None
    halstead_difficulty: float | None = None
    maintainability: float | None = None  # 0..100, higher is easier to maintain

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        if not self.parsed:
            return f"{self.blocks} code block(s), {self.lines} lines (not analysed)"
        return (f"{self.blocks} code block(s), {self.lines} lines, cyclomatic complexity {self.cyclomatic}, "
                f"Halstead volume {self.halstead_volume:.0f}, maintainability index {self.maintainability:.0f}")

    def simplicity_key(self) -> tuple:
        """Lower sorts first: simpler code."""
        return (self.cyclomatic or 0, self.halstead_volume or 0.0, self.lines)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Fenced code blocks in `text` as (language, code); language is lower case, maybe ""."""
    return [(lang.lower(), code) for lang, code in _FENCE.findall(text)]


def code_metrics(text: str) -> CodeMetrics | None:
    """Metrics for the code in a candidate, or None when it has no fenced code."""
    blocks = code_blocks(text)
    if not blocks:
        return None
    if any(lang not in _PYTHON for lang, _ in blocks):
        return CodeMetrics(len(blocks), _nonblank(blocks), parsed=False)
    found = analyse("\n\n".join(code for _, code in blocks))
    if found is None:
        return CodeMetrics(len(blocks), _nonblank(blocks), parsed=False)
    return CodeMetrics(blocks=len(blocks), lines=found.sloc, parsed=True, cyclomatic=found.cyclomatic,
                       halstead_volume=found.halstead_volume, halstead_difficulty=found.halstead_difficulty,
                       maintainability=found.maintainability)


def _nonblank(blocks: Sequence[tuple[str, str]]) -> int:
    return sum(1 for _, code in blocks for line in code.splitlines() if line.strip())


def over_budget(metrics: Sequence[CodeMetrics | None], budget: float) -> dict[int, str]:
    """Indexes of candidates whose code is more than `budget` times as complex as the median of
    their analysed siblings (cyclomatic complexity or Halstead volume), with the reason.
    Needs at least one analysed sibling; never rejects every candidate."""
    analysed = {i: m for i, m in enumerate(metrics) if m is not None and m.parsed}
    rejected: dict[int, str] = {}
    for i, m in analysed.items():
        others = [o for j, o in analysed.items() if j != i]
        why = _too_complex(m, others, budget) if others else None
        if why:
            rejected[i] = why
    return {} if len(rejected) >= len(metrics) else rejected


def _too_complex(m: CodeMetrics, others: list[CodeMetrics], budget: float) -> str | None:
    cc_median = statistics.median(o.cyclomatic or 0 for o in others)
    if (m.cyclomatic or 0) > budget * max(1.0, cc_median):
        return f"cyclomatic complexity {m.cyclomatic} is over {budget:g}x the siblings' median {cc_median:g}"
    vol_median = statistics.median(o.halstead_volume or 0.0 for o in others)
    if (m.halstead_volume or 0.0) > budget * max(1.0, vol_median):
        return f"Halstead volume {m.halstead_volume:.0f} is over {budget:g}x the siblings' median {vol_median:.0f}"
    return None


# -- the arbiter's reply ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the arbiter decided. `ranking` lists groups of 0-based candidate indexes, best
    first; candidates in one group are tied. `confidence` is 0..1 or None when not given."""

    ranking: list[list[int]]
    confidence: float | None
    refine: list[str] = field(default_factory=list)
    answer: str | None = None
    notes: list[str] = field(default_factory=list)  # which fallbacks were needed, if any
    format_ok: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tag(reply: str, tag: str, nonce: str) -> str | None:
    """The content of `<tag-NONCE>...</tag-NONCE>`, or None. Only the nonce form counts: a
    candidate never saw the nonce, so only the arbiter can have written it."""
    found = re.search(rf"<{tag}-{re.escape(nonce)}>(.*?)</{tag}-{re.escape(nonce)}>", reply, re.DOTALL)
    return found.group(1).strip() if found else None


def parse_verdict(reply: str, nonce: str, count: int, *, want_answer: bool = False) -> Verdict:
    """Read the arbiter's reply about `count` candidates (numbered 1..count in the prompt)."""
    notes: list[str] = []
    ranking, ranking_ok = _read_ranking(reply, nonce, count, notes)
    confidence = _parse_confidence(_tag(reply, "confidence", nonce))
    if confidence is None:
        notes.append("no confidence tag with this run's nonce")
    answer = _tag(reply, "answer", nonce) if want_answer else None
    if want_answer and answer is None:
        notes.append("no answer tag in a synthesis reply")
    ok = ranking_ok and confidence is not None and (answer is not None or not want_answer)
    return Verdict(ranking, confidence, _parse_refine(_tag(reply, "refine", nonce)), answer, notes, ok)


def read_confidence(text: str, nonce: str) -> float | None:
    """The confidence in (part of) an arbiter reply, or None when it gives none (yet)."""
    return _parse_confidence(_tag(text, "confidence", nonce))


def _read_ranking(reply: str, nonce: str, count: int, notes: list[str]) -> tuple[list[list[int]], bool]:
    """The ranking as tie groups covering every candidate, and whether it was complete."""
    raw = _tag(reply, "ranking", nonce)
    if raw is None:
        notes.append("no ranking tag with this run's nonce")
    ranking = _parse_ranking(raw or "", count)
    complete = _complete(ranking, count, notes)
    return ranking, raw is not None and complete


def _complete(ranking: list[list[int]], count: int, notes: list[str]) -> bool:
    """Append the candidates the ranking left out, tied, last; False if there were any."""
    if not ranking:
        notes.append("no usable ranking: every candidate treated as tied")
    ranked = {i for group in ranking for i in group}
    missing = [i for i in range(count) if i not in ranked]
    if missing and ranking:
        notes.append(f"candidates {', '.join(str(i + 1) for i in missing)} were not ranked; placed last")
    if missing:
        ranking.append(missing)
    return not missing


def _parse_ranking(text: str, count: int) -> list[list[int]]:
    """'2, 1, 3' or '2 > 1 > 3' or '2 = 1 > 3' or a numbered list of candidate numbers."""
    groups: list[list[int]] = []
    seen: set[int] = set()
    for piece in re.split(r"[,>;\n]+", text):
        if "=" in piece:
            numbers = [int(n) for n in re.findall(r"\d+", piece)]
        else:
            found = re.findall(r"\d+", piece)
            numbers = [int(found[-1])] if found else []  # "1. candidate 3" means 3
        group = [n - 1 for n in numbers if 1 <= n <= count and n - 1 not in seen]
        seen.update(group)
        if group:
            groups.append(group)
    return groups


def _parse_confidence(text: str | None) -> float | None:
    if not text:
        return None
    match = re.search(r"(\d+(?:\.\d+)?)\s*(%?)", text)
    if not match:
        return None
    value = float(match.group(1))
    if match.group(2) or value > 1.0:
        value /= 100.0
    return value if 0.0 <= value <= 1.0 else None


def _parse_refine(text: str | None) -> list[str]:
    if not text:
        return []
    items = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip() for line in text.splitlines()]
    return [item for item in items if item and item.lower() not in {"none", "n/a", "nothing"}]


def order_candidates(ranking: Sequence[Sequence[int]], metrics: Sequence[CodeMetrics | None],
                     rejected: Sequence[int] = ()) -> list[int]:
    """Candidate indexes best first: the arbiter's groups in order; inside a group of ties,
    candidates with simpler code first (then those without code), else arrival order.
    Rejected candidates (over the complexity budget) are left out."""
    out: list[int] = []
    for group in ranking:
        kept = [i for i in group if i not in rejected]

        def key(i: int) -> tuple:
            m = metrics[i] if i < len(metrics) else None
            return (0, *m.simplicity_key(), i) if m is not None else (1, 0, 0.0, 0, i)

        out.extend(sorted(kept, key=key))
    return out
