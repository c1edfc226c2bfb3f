"""`route eval`: routing quality of the scorer beside the baselines (random, length, always
local or hosted, oracle) on a routing set, or leave-one-dataset-out over a directory of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from backends.errors import UsageError
from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json, Weights
from router.cli.output import Output
from router.cli.records import read_records, serving_scorer

if TYPE_CHECKING:
    from rich.table import Table

    from policies.routing_eval import RoutingReport

__all__ = ["app", "eval_", "eval_table", "evaluate_records"]

app = command_app()


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


def evaluate_records(scorer: Any, records: Sequence[dict[str, Any]]) -> tuple[list[RoutingReport], list[float]]:
    """The scorer's report followed by the baselines, all on these records."""
    from policies.routing_eval import baseline_reports, evaluate

    prompts = [r["prompt"] for r in records]
    local = [float(r["local"]) for r in records]
    hosted = [float(r["hosted"]) for r in records]
    scores = [scorer.score_text(p) for p in prompts]
    return [evaluate(scorer.name, scores, local, hosted), *baseline_reports(prompts, local, hosted)], scores


@app.command("eval")
@handle_errors
def eval_(
    data: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt, local, hosted}")] = None,
    weights: Weights = None,
    json_output: Json = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="write quality vs hosted share here")] = None,
    leave_one_out: Annotated[
        Path | None,
        typer.Option("--leave-one-out", help="directory of routing sets: fit on all but one, judge on it, each in turn"),
    ] = None,
    config: Config = None,
) -> None:
    """Routing quality of the scorer beside random, length, always-local/hosted and oracle.

    The scorer is the one `route serve` decides with under the config (-c, else the search
    order), the learned version in use included; --weights judges a weights file instead."""
    out = Output(json_mode=json_output)
    if leave_one_out is not None:
        _eval_leave_one_out(leave_one_out, out)
        return
    if data is None:
        raise UsageError("route eval needs a JSONL file of routing records, or --leave-one-out DIR.")
    records = read_records(data, ("id", "prompt", "local", "hosted"))
    scorer = serving_scorer(weights, config)
    reports, scores = evaluate_records(scorer, records)
    if json_output:
        out.data({"data": str(data), "records": len(records), "reports": [r.as_dict() for r in reports]})
    else:
        out.out.print(eval_table(reports, f"{data.name}: {len(records)} prompts"))
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
        out.info(f"wrote {plot}")


def _eval_leave_one_out(directory: Path, out: Output) -> None:
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
    rows, text = leave_one_out_table(sets, log=out.info)
    if out.json_mode:
        out.data({"data": str(directory), "leave_one_out": [r.as_dict() for r in rows]})
    else:
        out.text(text, end="\n")
