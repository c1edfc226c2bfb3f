"""Leave-one-dataset-out evaluation: the complexity scorer's development metric.

Every routing set in a directory is left out in turn: weights are fitted on all the others
and judged on it, beside prompt length and random (0.5) measured on the same records. A
scorer is only as good as it is on prompts of a kind it never saw, so this, not a split of a
set it was fitted on, decides which weights ship.

Training records drop the tasks whose labels say nothing about the prompt (see the data's
README): `TRAINING_EXCLUDED` by the `[task]` tag in a record's `source`. The left-out set is
always judged whole. Sets whose labels are an agent's outcome on a whole coding task
(`AGENT_SETS`: swebench_pro) are judged, never fitted on: whether a model resolves an issue
shows in its session's evidence, not in the issue's text (DESIGN.md, "Local first, verified"),
and fitting a prompt's difficulty on them pulls every other set below length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from policies.complexity.model import ComplexityScorer, Weights
from policies.complexity.training.fit import load_records
from policies.routing_eval import apgr, quality_curve

__all__ = [
    "AGENT_SETS", "TRAINING_EXCLUDED", "LeftOut", "fit_general", "format_table", "judge", "leave_one_out",
    "leave_one_out_table", "load_sets", "nested_leave_one_out", "set_apgr", "summary_row", "training_records",
]

# llmrouter's answers were capped at 512 tokens and scored by exact match: on these tasks both
# models score alike or the weaker wins for verbosity reasons, not because the prompt was easy.
TRAINING_EXCLUDED = frozenset({"trivia_qa", "natural_qa", "math"})
AGENT_SETS = frozenset({"swebench_pro"})  # labels of an agent's whole task: judged, not fitted on
_TASK = re.compile(r"\[([^\]]+)\]")

Fitter = Callable[[list[dict[str, Any]]], Weights]


@dataclass(frozen=True, slots=True)
class LeftOut:
    """One left-out set's figures (APGR; random routing is 0.5 by construction)."""

    name: str
    prompts: int
    ours: float
    length: float
    random: float = 0.5

    @property
    def margin(self) -> float:
        return self.ours - self.length

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "margin": round(self.margin, 4)}


def load_sets(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Every `*.jsonl` file in `directory` by its stem, each record tagged with its set."""
    files = sorted(directory.glob("*.jsonl"))
    if len(files) < 2:
        raise ValueError(f"{directory}: leave-one-out needs at least two *.jsonl routing sets, found {len(files)}")
    sets = {}
    for path in files:
        sets[path.stem] = [{**r, "dataset": path.stem} for r in load_records([path])]
    return sets


def training_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records worth fitting on (see `TRAINING_EXCLUDED`)."""
    kept = []
    for r in records:
        task = _TASK.search(str(r.get("source", "")))
        if task is None or task.group(1) not in TRAINING_EXCLUDED:
            kept.append(r)
    return kept


def set_apgr(scores: Sequence[float], records: Sequence[dict[str, Any]]) -> float:
    value = apgr(quality_curve(scores, [float(r["local"]) for r in records], [float(r["hosted"]) for r in records]))
    return 0.5 if value is None else value  # no gap to recover: every order is as good as random


def judge(scorer: ComplexityScorer, name: str, records: Sequence[dict[str, Any]]) -> LeftOut:
    """The scorer's and length's APGR on one set."""
    ours = set_apgr([scorer.score_text(r["prompt"]) for r in records], records)
    length = set_apgr([float(len(r["prompt"])) for r in records], records)
    return LeftOut(name, len(records), round(ours, 4), round(length, 4))


def leave_one_out(
    sets: dict[str, list[dict[str, Any]]], fitter: Fitter, log: Callable[[str], None] = lambda _: None
) -> list[LeftOut]:
    """For each set: fit on the others (`training_records` of them), judge on it."""
    rows = []
    for name, records in sets.items():
        train = [r for other, rs in sets.items() if other != name and other not in AGENT_SETS
                 for r in training_records(rs)]
        weights = fitter(train)
        rows.append(judge(ComplexityScorer(weights), name, records))
        log(f"left out {name}: ours {rows[-1].ours:.3f}, length {rows[-1].length:.3f}")
    return rows


def nested_leave_one_out(
    sets: dict[str, list[dict[str, Any]]], candidates: Mapping[str, Fitter], log: Callable[[str], None] = lambda _: None
) -> list[tuple[LeftOut, str]]:
    """`leave_one_out` where the recipe, too, is chosen without the left-out set: for each set,
    every candidate is judged leaving out each of the other sets in turn (their mean APGR), and
    the best is fitted on all the others and judged on this one. (row, chosen candidate) per set.

    Choosing a recipe by the plain leave-one-out table looks at every set it then reports on,
    so its mean flatters the recipe; this is the figure to quote for a choice among several."""
    out = []
    for name, records in sets.items():
        inner = {other: rs for other, rs in sets.items() if other != name}
        means = {label: summary_row(leave_one_out(inner, fitter)).ours for label, fitter in candidates.items()}
        chosen = max(means, key=lambda label: means[label])
        train = [r for rs in inner.values() for r in training_records(rs)]
        out.append((judge(ComplexityScorer(candidates[chosen](train)), name, records), chosen))
        log(f"left out {name}: chose {chosen} (inner means {means}); ours {out[-1][0].ours:.3f}")
    return out


def summary_row(rows: Sequence[LeftOut]) -> LeftOut:
    """The mean over the left-out sets, as one row named "mean"."""
    n = len(rows)
    return LeftOut(
        "mean", sum(r.prompts for r in rows), round(sum(r.ours for r in rows) / n, 4),
        round(sum(r.length for r in rows) / n, 4),
    )  # fmt: skip


def fit_general(records: list[dict[str, Any]]) -> Weights:
    """The shipped fitting recipe (`learn.GENERAL`) on these records."""
    from policies.complexity.training.learn import GENERAL, design, learn

    return learn(design(records), GENERAL)


def format_table(rows: Sequence[LeftOut]) -> str:
    """A plain-text table of the left-out sets and their mean."""
    lines = [f"{'left out':18s} {'prompts':>8s} {'ours':>7s} {'length':>7s} {'random':>7s} {'ours-len':>9s}"]
    for r in [*rows, summary_row(rows)]:
        lines.append(f"{r.name:18s} {r.prompts:8d} {r.ours:7.3f} {r.length:7.3f} {r.random:7.3f} {r.margin:+9.3f}")
    return "\n".join(lines)


def leave_one_out_table(
    sets: dict[str, list[dict[str, Any]]], fitter: Fitter = fit_general, log: Callable[[str], None] = lambda _: None
) -> tuple[list[LeftOut], str]:
    """`leave_one_out` with the shipped recipe, and its rows as a table."""
    rows = leave_one_out(sets, fitter, log)
    return rows, format_table(rows)
