"""The learning panel: what the router learns from its traffic, and from which labels.

The page draws whatever sections `learning_panel` returns; more can be added by registering a
section, without touching the page:

    from router.server.ui.learning import Fact, Section, add_learning_section

    def drift(router):
        return Section("Drift", [Fact("share of prompts unlike the labels", 0.12, error=0.02)])

    add_learning_section("drift", drift)   # a name already shown is replaced in place

The sections: the scorer in use (kind, weights file, thresholds per tier boundary), the labels
recorded so far by source (the store's feedback table, router/store/feedback.py: users' verdicts,
consortium preferences), and what `routing.learn` learned (router/learning/status.py: the
version in use, its estimated quality with its error, each boundary's last refit -- kept,
adopted or waiting, why, and the traffic it moves -- shadow spend). A section function may do blocking I/O: the panel is built off the event loop,
at most every few seconds, and a section that raises is shown as its error, alone.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["Fact", "Section", "add_learning_section", "learning_panel"]

LEARNING_OFF = ("Routing does not learn from its traffic in this config: `routing.learn` turns on shadow "
                "judging, versions and their estimated quality (docs/guide/learning.md).")


@dataclass(frozen=True, slots=True)
class Fact:
    label: str
    value: Any
    error: float | None = None  # an estimate's standard error, shown as ± beside the value
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    facts: list[Fact] = field(default_factory=list)
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


SectionFn = Callable[["RouterService"], "Section | None"]


def scorer_section(router: RouterService) -> Section:
    spec = router.view.config.routing.scorer
    weights = spec.options.get("weights")
    model = router.view.model  # read once: one version for the whole section
    name = model.scorer.name
    facts = [Fact("scorer", spec.kind if name == spec.kind else f"{spec.kind} ({name})"),
             Fact("weights", weights or ("the shipped weights" if spec.kind == "learned" else "none: a fixed rule"))]
    threshold = getattr(model.scorer, "threshold", None)
    if threshold is not None:
        facts.append(Fact("calibrated threshold", round(float(threshold), 4)))
    heads = model.ladder.heads or (None,) * (len(model.tiers) - 1)
    for tier, head in zip(model.tiers, (*heads, None)):
        if tier.below is not None:
            name = head[0] if head is not None else "routing scorer"
            facts.append(Fact(f"{tier.name} → next tier", f"score ≥ {tier.below:.3f}", hint=name))
    version = getattr(getattr(model.scorer, "weights", None), "metadata", {}).get("version")
    facts.append(Fact("weights file version", version or "unversioned"))
    facts.append(Fact("routing model version", model.version, hint="0: as configured; learning adopts higher ones"))
    return Section("Scorer in use", facts)


def _feedback_path(router: RouterService) -> Path:
    from router.store import default_store_path

    path = router.view.config.log.path
    return Path(path).expanduser() if path else default_store_path()


def label_counts(path: Path) -> dict[str, int]:
    """Labels recorded so far, by source and verdict, read-only; {} when there are none."""
    if not path.exists():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2.0)) as conn:
            rows = conn.execute("SELECT source, verdict, COUNT(*) FROM feedback GROUP BY source, verdict").fetchall()
    except sqlite3.OperationalError:  # no feedback table yet: no labels
        return {}
    return {f"{source} ({verdict})" if verdict else str(source): int(n) for source, verdict, n in rows}


def labels_section(router: RouterService) -> Section:
    counts = label_counts(_feedback_path(router))
    facts = [Fact(source, n) for source, n in sorted(counts.items())] or [Fact("labels", 0)]
    return Section("Labels by source", facts,
                   note="`route feedback ID good|bad`, POST /v1/feedback, and consortium rankings of a "
                        "local member against a hosted one. `route calibrate --from-log` learns from them.")


def estimates_section(router: RouterService) -> Section:
    """routing.learn's state (router/learning/status.py): the version in use, each tier
    boundary's estimated APGR on labels its weights were not fitted on, shadow spend."""
    from router.learning.status import status

    if router.view.config.routing.learn is None:
        return Section("Estimated quality and shadow spend", [Fact("learning", "off")], note=LEARNING_OFF)
    found = status(router.view.config)
    facts = [Fact("version in use", found["version"] or "the configured weights",
                  hint="pinned by `route learn rollback`" if found["pinned"] else None)]
    for boundary in found["boundaries"]:
        apgr = boundary["apgr"]
        facts.append(Fact(f"{boundary['boundary']}: estimated APGR", None if apgr is None else apgr["value"],
                          error=None if apgr is None else apgr.get("se"),
                          hint=f"on {boundary['judged_on']} labels its weights were not fitted on"))
        facts += _refit_facts(boundary["boundary"], boundary["last_refit"])
    facts += [Fact(f"{source} labels", n, hint="usable: as a refit reads them")
              for source, n in found["labels"]["by_source"].items()]
    spent = found["spend"]
    facts.append(Fact("shadow spend today (UTC)", f"${spent['today_usd']:.4f} of ${spent['budget_usd_per_day']:.2f}",
                      hint=f"{spent['today_calls']} judging calls"))
    return Section("Estimated quality and shadow spend", facts,
                   note="`route learn status` shows the same; `route learn history` the versions.")


def _refit_facts(name: str, refit: dict[str, Any] | None) -> list[Fact]:
    """A boundary's last refit: kept, adopted or waiting, why, its gains with their errors, the
    usable labels it read and the traffic it moves (router/learning/status.py)."""
    if refit is None:
        return [Fact(f"{name}: last refit", "none yet")]
    outcome = refit["outcome"] + (f" (version {refit['version']})" if refit.get("version") else "")
    if refit["outcome"] == "waiting":
        outcome += ": `route learn adopt` adopts it"
    gain, placement = refit.get("gain") or {}, refit.get("placement") or {}
    return [Fact(f"{name}: last refit", outcome, hint=refit.get("reason")),
            Fact(f"{name}: order gain (APGR)", gain.get("value"), error=gain.get("se")),
            Fact(f"{name}: placement gain", placement.get("value"), error=placement.get("se"),
                 hint="share of the labels' weight placed on the right side of the boundary, gained"),
            Fact(f"{name}: labels used", refit.get("labels_used"), hint="usable labels only"),
            Fact(f"{name}: traffic moved", refit["moves"])]


# name -> section, in the order shown (dicts keep insertion order)
_SECTIONS: dict[str, SectionFn] = {"scorer": scorer_section, "labels": labels_section,
                                   "estimates": estimates_section}


def add_learning_section(name: str, section: SectionFn) -> None:
    """Show `section(router)` on the learning panel: in place of the section called `name`, or
    after the others for a new name. A section returning None is left out."""
    _SECTIONS[name] = section


def learning_panel(router: RouterService) -> dict[str, Any]:
    sections = []
    for build in list(_SECTIONS.values()):
        try:
            section = build(router)
        except Exception as exc:  # one broken section must not take the panel down
            section = Section(getattr(build, "__name__", "section"), note=f"unavailable: {type(exc).__name__}: {exc}")
        if section is not None:
            sections.append(section.as_dict())
    return {"sections": sections}
