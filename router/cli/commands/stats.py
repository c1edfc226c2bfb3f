"""`route stats`: per backend and per tier, from the request log, with the spend (and a latency plot)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.log_store import fmt, open_store, since_ts
from router.cli.options import Config, Json, Since
from router.cli.output import Output

__all__ = ["app", "stats"]

app = command_app()


def _shadow_spend(config):
    """Shadow judging's spend (router/learning/status.py), or None when the config does not learn."""
    if config.routing.learn is None:
        return None
    from router.learning.status import spend

    return spend(config)


def _stats_table(stats, window: str, total_usd: float):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"per backend ({window}) · total spend ${total_usd:.4f}", title_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    table.add_column("backend", overflow="fold", min_width=12)  # a long name wraps; the numbers never do
    for column in ("reqs", "share", "p50 s", "p95 s", "ttft s", "tok/s", "$", "errors"):
        table.add_column(column, justify="right", no_wrap=True)
    for s in stats:
        table.add_row(escape(s.backend), str(s.requests), f"{s.share:.0%}", fmt(s.p50_s, ".2f"), fmt(s.p95_s, ".2f"),
                      fmt(s.ttft_p50_s, ".2f"), fmt(s.tokens_per_s, ".0f"), f"{s.cost_usd:.4f}",
                      f"{s.error_rate:.0%}" + (f" +{s.cancelled}c" if s.cancelled else ""))
    return table


def _tiers_table(tiers, window: str):
    """Per scored tier: how often a weaker tier answered instead (a downgrade)."""
    from rich.table import Table

    table = Table(title=f"per tier ({window})", title_justify="left")
    for column in ("tier", "requests", "downgraded", "answered by"):
        table.add_column(column, justify="left" if column in ("tier", "answered by") else "right")
    for t in tiers:
        to = ", ".join(f"{name} {n}" for name, n in sorted(t.downgraded_to.items())) or "-"
        table.add_row(t.tier, str(t.requests), f"{t.downgraded} ({t.downgraded / t.requests:.0%})", to)
    return table


def _plot(rows: list[dict[str, Any]], path: str) -> None:
    """Latency distributions per backend, one box each, to an image file."""
    from backends.errors import UsageError

    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed; install the plot extra: "
                         "`pip install 'latency-router[plot]'` (or `pip install matplotlib`).") from None
    latencies: dict[str, list[float]] = {}
    for r in rows:
        if r["status"] == "ok" and r.get("total_s") is not None:
            latencies.setdefault(r.get("backend") or "-", []).append(r["total_s"])
    if not latencies:
        raise UsageError("no successful requests in the window: nothing to plot; widen --since or make some requests.")
    names = sorted(latencies)
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(names) + 2), 4))
    ax.boxplot([latencies[n] for n in names], showfliers=True)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=20)
    ax.set_ylabel("latency, seconds (whole answer)")
    ax.set_yscale("log")
    ax.set_title("route: latency per backend")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@app.command("stats", help="Per backend: requests, share, p50/p95 latency, time to first token, tokens/s, "
                           "cost, error rate, and the total spend, from the request log.")
@handle_errors
def stats(
    since: Since = None,
    plot: Annotated[str | None, typer.Option("--plot", help="Also draw latency per backend to this image file.")] = None,
    json_output: Json = False,
    config: Config = None,
) -> None:
    from router.config_loader import load_config
    from router.store.stats import summarize, summarize_tiers

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    store = open_store(config)
    with store.guard():
        rows = store.stat_rows(since_ts=since_ts(since))
    summary, tiers = summarize(rows), summarize_tiers(rows)
    total = sum(r.get("cost_usd") or 0.0 for r in rows)
    if plot:
        _plot(rows, plot)
    cap = loaded.config.spend.cap_usd
    shadow = _shadow_spend(loaded.config)
    if json_output:
        out.data({"since": since, "requests": len(rows), "total_cost_usd": total, "spend_cap_usd": cap,
                  "backends": [s.as_dict() for s in summary], "tiers": [t.as_dict() for t in tiers],
                  "shadow_judging": shadow})
    else:
        _show(out, summary, tiers, since, total, loaded.config, shadow)
    if plot:
        out.info(f"latency plot written to {plot}")


def _show(out: Output, summary, tiers, since: str | None, total: float, config, shadow) -> None:
    """The tables, the spend cap and shadow judging's spend, for a person."""
    if not summary:
        out.info("no requests logged in this window")
    else:
        window = f"last {since}" if since else "all time"
        out.out.print(_stats_table(summary, window, total))
        if tiers:
            out.out.print(_tiers_table(tiers, window))
        if config.spend.cap_usd is not None:
            out.info(f"spend cap: ${config.spend.cap_usd:g} per {config.spend.window_days:g} days (spend.cap_usd)")
    if shadow is not None:
        out.out.print(f"shadow judging (routing.learn): ${shadow['today_usd']:.4f} today (UTC) of "
                      f"${shadow['budget_usd_per_day']:g} a day, {shadow['today_calls']} calls; "
                      f"${shadow['total_usd']:.4f} all days, {shadow['total_calls']} calls")
