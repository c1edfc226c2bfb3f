"""`route calibrate`: adapt the scorer's weights to labelled prompts (a file, or the labels the
router collected: --from-log), or set only its threshold; the file is written only when the
cross-validated gain exceeds its error. Fitting lives in policies/complexity/training/."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from backends.errors import UsageError
from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json, Weights
from router.cli.output import Output
from router.cli.records import load_scorer, read_records

if TYPE_CHECKING:
    from policies.complexity.model import Weights as ScorerWeights

__all__ = ["app", "calibrate"]

app = command_app()


@app.command("calibrate")
@handle_errors
def calibrate(
    data: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt, local, hosted}")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="weights file to write")] = None,
    hosted_share: Annotated[float, typer.Option("--hosted-share", help="share of prompts to send to the hosted tier")] = 0.3,
    holdout: Annotated[float, typer.Option("--holdout", help="--threshold-only: share held out (by id hash) to "
                                           "check the threshold on")] = 0.3,
    threshold_only: Annotated[bool, typer.Option("--threshold-only", help="keep the weights, set only the threshold")] = False,
    weights: Weights = None,
    json_output: Json = False,
    from_log: Annotated[bool, typer.Option("--from-log", help="learn from the labels the router collected: feedback, "
                                           "consortium rankings, shadow judgements")] = False,
    config: Config = None,
) -> None:
    """Adapt the weights in use to labelled prompts of your own; written only when they route better.

    The weights move towards what the labels show, no further than cross-validation inside them
    supports; the cross-validated APGR before and after is reported with its standard error, and
    the file is written only when the gain exceeds 1.28 errors (docs/guide/learning.md)."""
    report = Output(json_mode=json_output)
    if out is None:
        raise UsageError("route calibrate needs --out FILE: where to write the weights.")
    _check_shares(hosted_share, holdout)
    if from_log:
        current, records, where = _labels_from_log(config, weights)
        _report(report, _adapt(report, current, records, out, hosted_share, where))
        return
    if data is None:
        raise UsageError("route calibrate needs a JSONL file of routing records, or --from-log.")
    if threshold_only:
        _report(report, _threshold_only(data, out, hosted_share, holdout, weights))
        return
    records = _numeric(read_records(data, ("id", "prompt", "local", "hosted")), data)
    _report(report, _adapt(report, load_scorer(weights).weights, records, out, hosted_share, str(data)))


def _check_shares(hosted_share: float, holdout: float) -> None:
    if not 0.0 < hosted_share < 1.0:
        raise UsageError(f"--hosted-share must be between 0 and 1 (exclusive), got {hosted_share}.")
    if not 0.0 <= holdout < 1.0:
        raise UsageError(f"--holdout must be in [0, 1), got {holdout}.")


def _numeric(records: list[dict[str, Any]], source: Path) -> list[dict[str, Any]]:
    """The records, with `local` and `hosted` checked to be qualities in [0, 1]."""
    for n, r in enumerate(records, 1):
        for key in ("local", "hosted"):
            value = r[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise UsageError(f"{source} record {n} ({r['id']!r}): {key} must be a quality between 0 and 1, "
                                 f"got {value!r}.")
    return records


def _threshold_only(data: Path, out: Path, hosted_share: float, holdout: float, weights: Path | None) -> dict[str, Any]:
    from policies.complexity.training.fit import calibrated, split

    records = read_records(data, ("id", "prompt"))
    train, test = split(records, holdout)
    if not train:
        raise UsageError(f"no records left to set the threshold on after holding out {holdout:.0%}; lower --holdout.")
    fitted = calibrated(load_scorer(weights).weights, train, hosted_share)
    fitted.save(out)
    summary: dict[str, Any] = {"out": str(out), "threshold": fitted.threshold, "hosted_share": hosted_share}
    summary.update(_held_out_summary(fitted, test))
    return summary


def _adapt(report: Output, current: ScorerWeights, records: list[dict[str, Any]], out: Path, hosted_share: float, where: str) -> dict[str, Any]:
    """Adapt `current` to `records` (policies/complexity/training/adapt.py); write `out` only
    when the cross-validated gain passes the adoption test (policies/complexity/training/gate.py)."""
    from dataclasses import replace

    from policies.complexity.training.adapt import adapt
    from policies.complexity.training.fit import calibrated

    report.info(f"adapting the weights in use to {len(records)} labels from {where} (cross-validated)...")
    found = adapt(current, records)
    summary: dict[str, Any] = {"out": None, "installed": found.adopted, **found.as_dict()}
    del summary["adopted"], summary["reason"]
    if found.adopted:
        fitted = calibrated(found.weights, records, hosted_share)
        fitted = replace(fitted, metadata={**fitted.metadata, "calibrated_on": where})
        fitted.save(out)
        summary.update(out=str(out), threshold=fitted.threshold, hosted_share=hosted_share,
                       note=f"adapted weights written: {found.reason}")
    else:
        summary["note"] = f"kept the weights in use, {out} not written: {found.reason}"
    return summary


def _labels_from_log(config: str | None, weights: Path | None) -> tuple[ScorerWeights, list[dict[str, Any]], str]:
    """(the weights deciding the lowest boundary, its labels in the learning store once the
    request log's feedback is imported, where they are)."""
    from router.config_loader import load_config
    from router.learning import open_store, store_label
    from router.learning.labels import import_feedback
    from router.learning.status import configured_weights

    cfg = load_config(config).config
    if len(cfg.routing.tiers) < 2:
        raise UsageError("--from-log learns when a prompt needs a stronger tier; this config has one tier.")
    store = open_store(cfg)
    try:
        import_feedback(store, cfg)
        records = [r.record() for r in store.labels(0)]
    finally:
        store.close()
    if not records:
        raise UsageError(f"{store_label(cfg)} holds no labels yet: record verdicts with `route feedback ID good|bad`, "
                         "or turn on shadow judging (routing.learn.shadow_rate; docs/guide/learning.md).")
    if weights is not None or cfg.routing.tiers[0].scorer is None and cfg.routing.scorer.kind != "learned":
        current = load_scorer(weights).weights  # -w, or the shipped weights when the config scores by length
    else:
        current = configured_weights(cfg, 0)
    return current, records, f"the labels in {store_label(cfg)}"


def _report(report: Output, summary: dict[str, Any]) -> None:
    if report.json_mode:
        report.data(summary)
    else:
        report.info(_summary_text(summary))


def _summary_text(summary: dict[str, Any]) -> str:
    """The summary as `name: value` lines, not a Python dict (--json has it as one object)."""
    def plain(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4f}"
        if isinstance(value, dict) and set(value) == {"value", "se"}:
            return f"{value['value']:.4f} ± {value['se']:.4f}"
        if isinstance(value, dict):
            return ", ".join(f"{k} {plain(v)}" for k, v in value.items())
        return str(value)

    return "\n".join(f"{name.replace('_', ' ')}: {plain(value)}" for name, value in summary.items())


def _held_out_summary(fitted: ScorerWeights, test: list[dict[str, Any]]) -> dict[str, Any]:
    """How the calibrated weights do on the held-out records: their hosted share, and per-dataset
    APGR when the records carry quality labels. Empty without held-out records."""
    from policies.complexity import ComplexityScorer
    from policies.complexity.training.fit import group_apgr

    if not test:
        return {}
    scorer = ComplexityScorer(fitted)
    threshold = fitted.threshold if fitted.threshold is not None else 1.0  # `calibrated` always sets it
    up = sum(scorer.score_text(r["prompt"]) >= threshold for r in test)
    summary: dict[str, Any] = {"held_out_hosted_share": up / len(test)}
    if "local" in test[0] and "hosted" in test[0]:
        summary["held_out_apgr"] = group_apgr(scorer, test)
    return summary
