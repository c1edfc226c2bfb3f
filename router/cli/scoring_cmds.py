"""`route score`, `route eval` and `route calibrate`: the complexity scorer from the shell.

Data goes to stdout (JSON lines, a table, or `--json`), messages to stderr. Bad input raises
`UsageError`, which the app turns into exit code 2 with a one-paragraph message.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from backends.errors import UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from policies.complexity.model import Weights
    from policies.routing_eval import RoutingReport

__all__ = ["eval_table", "register"]

def _err():
    """The stderr console, built on first use: `route --help` must not pay for rich's import."""
    from rich.console import Console

    return Console(stderr=True)

WeightsOpt = Annotated[
    Path | None,
    typer.Option("--weights", "-w", help="weights file (default: the shipped one)"),
]


def _scorer(weights: Path | None) -> Any:
    from policies.complexity import ComplexityScorer

    try:
        return ComplexityScorer.load(weights)
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(
            f"could not read the weights file {weights}: {exc}. Pass a file written by "
            "`route calibrate` or `python -m policies.complexity.training.fit`, or leave out --weights "
            "to use the shipped default."
        ) from exc


def _read_jsonl(lines: Iterator[str], source: str, required: Sequence[str]) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(
                f"{source} line {n} is not JSON ({exc.msg}). Each line must be one JSON object "
                'such as {"id": "1", "prompt": "..."}.'
            ) from exc
        missing = [k for k in required if not isinstance(record, dict) or k not in record]
        if missing:
            raise UsageError(
                f"{source} line {n} lacks {', '.join(missing)}. Each line needs "
                f"{', '.join(required)}."
            )
        yield record


def _records(path: Path, required: Sequence[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"no such file: {path}. Pass a JSONL file of routing records.")
    with path.open(encoding="utf-8") as f:
        records = list(_read_jsonl(f, str(path), required))
    if not records:
        raise UsageError(f"{path} holds no records. Pass a JSONL file with at least one line.")
    return records


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def eval_table(reports: Sequence[RoutingReport], title: str) -> Table:
    """A rich table of routing reports, one row per policy."""
    from rich.table import Table

    table = Table(title=title)
    for col in ("policy", "APGR", "CPT(50%)", "CPT(80%)", "PGR@50%", "quality@50%"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for r in reports:
        quality = _fmt(r.quality50)
        if r.hosted_share is not None:
            quality += f" (at {r.hosted_share:.0%})"
        table.add_row(r.policy, _fmt(r.apgr), _fmt(r.cpt50, True), _fmt(r.cpt80, True), _fmt(r.pgr50), quality)
    return table


def _plot(path: Path, curves: dict[str, list[tuple[float, float]]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UsageError(
            "--plot needs matplotlib, which is not installed. Install the `plot` extra "
            "(pip install 'latency-router[plot]') or leave out --plot."
        ) from exc
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        ax.plot([s for s, _ in curve], [q for _, q in curve], label=name)
    ax.set_xlabel("hosted share")
    ax.set_ylabel("mean quality")
    ax.legend()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def score(
    path: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt}; stdin when left out")] = None,
    weights: WeightsOpt = None,
) -> None:
    """Score prompts: reads {"id", "prompt"} lines, writes {"id", "score"} lines."""
    scorer = _scorer(weights)
    if path is not None and not path.is_file():
        raise UsageError(f"no such file: {path}. Pass a JSONL file of {{id, prompt}} lines, or pipe them in.")
    stream = path.open(encoding="utf-8") if path is not None else sys.stdin
    out, dumps, score_text = sys.stdout, orjson.dumps, scorer.score_text
    try:
        for record in _read_jsonl(stream, str(path or "stdin"), ("id", "prompt")):
            prompt = record["prompt"]
            if not isinstance(prompt, str):
                raise UsageError(f"record {record['id']!r}: prompt must be a string.")
            out.write(dumps({"id": record["id"], "score": round(score_text(prompt), 6)}).decode() + "\n")
    finally:
        if path is not None:
            stream.close()


def evaluate_records(scorer: Any, records: Sequence[dict[str, Any]]) -> tuple[list[RoutingReport], list[float]]:
    """The scorer's report followed by the baselines, all on these records."""
    from policies.routing_eval import baseline_reports, evaluate

    prompts = [r["prompt"] for r in records]
    local = [float(r["local"]) for r in records]
    hosted = [float(r["hosted"]) for r in records]
    scores = [scorer.score_text(p) for p in prompts]
    return [evaluate(scorer.name, scores, local, hosted), *baseline_reports(prompts, local, hosted)], scores


def eval_(
    data: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt, local, hosted}")] = None,
    weights: WeightsOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="write quality vs hosted share here")] = None,
    leave_one_out: Annotated[
        Path | None,
        typer.Option("--leave-one-out", help="directory of routing sets: fit on all but one, judge on it, each in turn"),
    ] = None,
) -> None:
    """Routing quality of the scorer beside random, length, always-local/hosted and oracle."""
    if leave_one_out is not None:
        _eval_leave_one_out(leave_one_out, json_out)
        return
    if data is None:
        raise UsageError("route eval needs a JSONL file of routing records, or --leave-one-out DIR.")
    records = _records(data, ("id", "prompt", "local", "hosted"))
    scorer = _scorer(weights)
    reports, scores = evaluate_records(scorer, records)
    if json_out:
        print(json.dumps({"data": str(data), "records": len(records), "reports": [r.as_dict() for r in reports]}))
    else:
        from rich.console import Console

        Console().print(eval_table(reports, f"{data.name}: {len(records)} prompts"))
    if plot is not None:
        from policies.routing_eval import quality_curve

        local = [float(r["local"]) for r in records]
        hosted = [float(r["hosted"]) for r in records]
        curves = {
            scorer.name: quality_curve(scores, local, hosted),
            "length": quality_curve([float(len(r["prompt"])) for r in records], local, hosted),
            "random": quality_curve([0.0] * len(records), local, hosted),
            "oracle": quality_curve([h - lo for h, lo in zip(hosted, local)], local, hosted),
        }
        _plot(plot, curves)
        _err().print(f"wrote {plot}")


def _eval_leave_one_out(directory: Path, json_out: bool) -> None:
    """Leave-one-dataset-out over the sets in `directory` with the shipped fitting recipe."""
    from policies.complexity.training.leave_one_out import (
        leave_one_out_table,
        load_sets,
    )

    if not directory.is_dir():
        raise UsageError(f"--leave-one-out: {directory} is not a directory. Pass a directory of *.jsonl routing sets.")
    try:
        sets = load_sets(directory)
    except (ValueError, KeyError) as exc:
        raise UsageError(f"--leave-one-out: {exc}. Each file needs id, prompt, local and hosted per line.") from exc
    rows, text = leave_one_out_table(sets, log=_err().print)
    if json_out:
        print(json.dumps({"data": str(directory), "leave_one_out": [r.as_dict() for r in rows]}))
    else:
        print(text)


def calibrate(
    data: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt, local, hosted}")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="weights file to write")] = None,
    hosted_share: Annotated[float, typer.Option("--hosted-share", help="share of prompts to send to the hosted tier")] = 0.3,
    holdout: Annotated[float, typer.Option("--holdout", help="--threshold-only: share held out (by id hash) to "
                                           "check the threshold on")] = 0.3,
    threshold_only: Annotated[bool, typer.Option("--threshold-only", help="keep the weights, set only the threshold")] = False,
    weights: WeightsOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="machine-readable summary")] = False,
    from_log: Annotated[bool, typer.Option("--from-log", help="learn from the labels the router collected: feedback, "
                                           "consortium rankings, shadow judgements")] = False,
    config: Annotated[str | None, typer.Option("-c", "--config", help="config whose labels to read (--from-log)")] = None,
) -> None:
    """Adapt the weights in use to labelled prompts of your own; written only when they route better.

    The weights move towards what the labels show, no further than cross-validation inside them
    supports; the cross-validated APGR before and after is reported with its standard error, and
    the file is written only when the gain exceeds that error (docs/guide/learning.md)."""
    if out is None:
        raise UsageError("route calibrate needs --out FILE: where to write the weights.")
    _check_shares(hosted_share, holdout)
    if from_log:
        current, records, where = _labels_from_log(config, weights)
        _report(_adapt(current, records, out, hosted_share, where), json_out)
        return
    if data is None:
        raise UsageError("route calibrate needs a JSONL file of routing records, or --from-log.")
    if threshold_only:
        _report(_threshold_only(data, out, hosted_share, holdout, weights), json_out)
        return
    records = _numeric(_records(data, ("id", "prompt", "local", "hosted")), data)
    _report(_adapt(_scorer(weights).weights, records, out, hosted_share, str(data)), json_out)


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

    records = _records(data, ("id", "prompt"))
    train, test = split(records, holdout)
    if not train:
        raise UsageError(f"no records left to set the threshold on after holding out {holdout:.0%}; lower --holdout.")
    fitted = calibrated(_scorer(weights).weights, train, hosted_share)
    fitted.save(out)
    summary: dict[str, Any] = {"out": str(out), "threshold": fitted.threshold, "hosted_share": hosted_share}
    summary.update(_held_out_summary(fitted, test))
    return summary


def _adapt(current: Weights, records: list[dict[str, Any]], out: Path, hosted_share: float, where: str) -> dict[str, Any]:
    """Adapt `current` to `records` (policies/complexity/training/adapt.py); write `out` only
    when the cross-validated gain exceeds its standard error."""
    from dataclasses import replace

    from policies.complexity.training.adapt import adapt
    from policies.complexity.training.fit import calibrated

    _err().print(f"adapting the weights in use to {len(records)} labels from {where} (cross-validated)...",
                 highlight=False)
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


def _labels_from_log(config: str | None, weights: Path | None) -> tuple[Weights, list[dict[str, Any]], str]:
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
        current = _scorer(weights).weights  # -w, or the shipped weights when the config scores by length
    else:
        current = configured_weights(cfg, 0)
    return current, records, f"the labels in {store_label(cfg)}"


def _report(summary: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print(json.dumps(summary))
    else:
        _err().print(_summary_text(summary), highlight=False)


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


def feedback(
    request_id: Annotated[str, typer.Argument(help="the request's id as `route log` shows it, or its trace id")],
    verdict: Annotated[str, typer.Argument(help="good or bad")],
    config: Annotated[str | None, typer.Option("-c", "--config", help="config whose request log to write to")] = None,
) -> None:
    """Say whether a routed answer was good or bad; `route calibrate --from-log` learns from it."""
    from router.config_loader import load_config
    from router.store.choice import open_log
    from router.store.feedback import judge

    store = open_log(load_config(config))
    try:
        logged = judge(store, request_id, verdict, admin=True)  # the operator's own command: any request
    finally:
        store.close()
    _err().print(f"recorded {verdict} for request {logged}")


def _check_shares(hosted_share: float, holdout: float) -> None:
    if not 0.0 < hosted_share < 1.0:
        raise UsageError(f"--hosted-share must be between 0 and 1 (exclusive), got {hosted_share}.")
    if not 0.0 <= holdout < 1.0:
        raise UsageError(f"--holdout must be in [0, 1), got {holdout}.")


def _held_out_summary(fitted: Weights, test: list[dict[str, Any]]) -> dict[str, Any]:
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


def register(app: typer.Typer) -> None:
    """Add `score`, `eval`, `calibrate` and `feedback` to the app."""
    from router.cli.app import handle_errors  # bad input: one paragraph and exit 2, no traceback

    app.command("score")(handle_errors(score))
    app.command("eval")(handle_errors(eval_))
    app.command("calibrate")(handle_errors(calibrate))
    app.command("feedback")(handle_errors(feedback))
