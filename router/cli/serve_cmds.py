"""`route serve`, `route log` and `route stats`: the OpenAI-compatible proxy and its request log."""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated, Any

import typer

from router.cli.output import Output

__all__ = ["register"]



def _store(config: str | None):
    """The request log the config points at: the SQLite file (`log.path`, else the user data
    dir), checked, or PostgreSQL (`log.backend: postgres`). A damaged file or an unreachable
    server is a StoreError (exit 2) naming it, never a driver traceback."""
    from router.config_loader import load_config
    from router.store.choice import open_log

    return open_log(load_config(config))


def _since(value: str | None) -> float | None:
    from router.cli.durations import parse_duration

    return None if value is None else time.time() - parse_duration(value, option="--since")


def _fmt(value: Any, spec: str, dash: str = "-") -> str:
    return dash if value is None else format(value, spec)


def _when(ts: float, *, short: bool = False) -> str:
    return time.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S", time.localtime(ts))


_STATUSES = ("ok", "error", "cancelled")


def _request_facts(row: dict[str, Any]) -> list[tuple[str, Any]]:
    decision = row.get("decision") or {}
    error = f": {row.get('error_type')}: {row.get('error')}" if row.get("error") else ""
    return [("id", row["id"]), ("time", _when(row["ts"])), ("source", row["source"]),
            ("asked for", row.get("requested") or "-"), ("backend", f"{row.get('backend') or '-'} ({row.get('model') or '-'})"),
            ("status", row["status"] + error), ("reason", decision.get("reason") or "-"),
            ("tokens", f"{_fmt(row.get('input_tokens'), 'd')} in, {_fmt(row.get('output_tokens'), 'd')} out"),
            ("time taken", f"{_fmt(row.get('total_s'), '.2f')} s (first token {_fmt(row.get('ttft_s'), '.2f')} s)"),
            ("cost", f"${_fmt(row.get('cost_usd'), '.6f')}"), ("trace", row.get("trace_id") or "-"),
            ("simulated", "yes: the answer is fake" if row.get("simulated") else "no")]


def _show_request(out: Output, row: dict[str, Any]) -> None:
    """The metadata as name/value lines, then the prompt, the thinking (when stored) and the answer in full."""
    from rich.markup import escape

    for name, value in _request_facts(row):
        out.out.print(f"[bold]{name:>10}[/]  {escape(str(value))}", overflow="fold")
    sections = [("prompt", row.get("prompt")), ("answer", row.get("answer"))]
    if row.get("thinking") is not None:  # stored only with log.store_thinking, and only when there was some
        sections.insert(1, ("thinking", row["thinking"]))
    for title, text in sections:
        out.out.print(f"\n[bold]── {title} ──[/]")
        out.text(text if text is not None else _missing(title, row), end="\n")


def _missing(title: str, row: dict[str, Any]) -> str:
    """Why a section is empty: a request that failed has no answer, whatever the log keeps."""
    if title == "answer" and row["status"] != "ok":
        return f"(none: the request {'was cancelled' if row['status'] == 'cancelled' else 'failed'}; see status above)"
    return "(not stored: log.store_content is false)"


def _log_table(rows: list[dict[str, Any]]):
    """Fits 80 columns: names never cut, the prompt takes what is left (in full: `route log show ID`)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    # Every column but the prompt keeps its width; the prompt gets the rest, cut to one line.
    table = Table(title="request log (newest first)", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    for column in ("id", "time", "backend", "status", "tok", "s", "$"):
        table.add_column(column, justify="left" if column in ("time", "backend", "status") else "right",
                         no_wrap=column != "backend", overflow="fold", min_width=12 if column == "backend" else None)
    table.add_column("prompt", overflow="ellipsis", max_width=60)
    for r in rows:
        status = r["status"] if r["status"] == "ok" else f"[red]{r['status']}[/]"
        prompt = " ".join((r.get("prompt") or "").split())
        table.add_row(str(r["id"]), _when(r["ts"], short=True), escape(r.get("backend") or "-"), status,
                      _fmt(r.get("output_tokens"), "d"), _fmt(r.get("total_s"), ".2f"),
                      _fmt(r.get("cost_usd"), ".4f"), escape(prompt[:24] + ("…" if len(prompt) > 24 else "")))
    return table


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
        table.add_row(escape(s.backend), str(s.requests), f"{s.share:.0%}", _fmt(s.p50_s, ".2f"), _fmt(s.p95_s, ".2f"),
                      _fmt(s.ttft_p50_s, ".2f"), _fmt(s.tokens_per_s, ".0f"), f"{s.cost_usd:.4f}",
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


def register(app: typer.Typer) -> None:
    from router.cli.app import handle_errors

    @app.command("serve", help="Serve the router as an OpenAI-compatible API (model `auto`, each backend, each "
                               "consortium) for editors and agents. Ctrl-C drains in-flight streams, then stops.")
    @handle_errors
    def serve(
        host: Annotated[str, typer.Option("--host", help="Bind address; beyond loopback needs --api-key-env.")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port (shown at start).")] = 4000,
        api_key_env: Annotated[str | None, typer.Option(
            "--api-key-env", help="Name of the environment variable holding the bearer token clients must send.")] = None,
        no_log: Annotated[bool, typer.Option("--no-log", help="Do not write the request log.")] = False,
        workers: Annotated[int, typer.Option(
            "--workers", min=1, max=256, help="Processes serving the port, each one event loop (about one core) with "
            "its own router from the config; connections are spread over them. Rate limits and breakers are shared "
            "by the workers, learned latency through the local store (or all of it through Redis: `state:` in the "
            "config); a worker that dies is replaced; /metrics adds up every worker; --max-connections is per "
            "worker. About one per core.")] = 1,
        max_body: Annotated[int, typer.Option("--max-body", min=1024, help="Largest request body, bytes.")] = 16 * 1024 * 1024,
        drain: Annotated[float, typer.Option("--drain-timeout", min=0.0, help="Seconds to let streams finish on shutdown.")] = 30.0,
        header_timeout: Annotated[float, typer.Option(
            "--header-timeout", min=0.1, help="Seconds a client may take to send a request head; then 408, closed.")] = 10.0,
        body_timeout: Annotated[float, typer.Option(
            "--body-timeout", min=0.1, help="Seconds a client may take to send a request body; then 408.")] = 60.0,
        max_header: Annotated[int, typer.Option(
            "--max-header-bytes", min=1024, help="Largest request head (request line and headers), bytes.")] = 64 * 1024,
        max_connections: Annotated[int, typer.Option(
            "--max-connections", min=1, help="Open connections at most (idle keep-alive ones count); then 503.")] = 1024,
        quiet: Annotated[bool, typer.Option("-q", "--quiet", help="No line per request on stderr (method, path, "
                                                              "status, backend, time, and why it failed).")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config", help="Config file (default: search order).")] = None,
    ) -> None:
        from router.config_loader import load_config
        from router.server.keys import server_keys
        from router.server.limits import ServerLimits
        from router.server.worker import ServeSpec, run_server, serving_router
        from router.store.choice import request_log_on

        out = Output()
        loaded = load_config(config)
        keys = server_keys(loaded, host, api_key_env)  # --api-key-env and server.keys, from the environment
        # --no-log opens no file at all (latency is then learned for this run only); an unusable
        # local store is one warning, then a SQLite log and latency learning are off (a
        # PostgreSQL log needs no local file).
        keep = request_log_on(loaded, out, no_log=no_log, check=True)
        limits = ServerLimits(header_timeout_s=header_timeout, body_timeout_s=body_timeout,
                              max_header_bytes=max_header, max_connections=max_connections)
        spec = ServeSpec(config=str(loaded.path), host=host, api_key_env=api_key_env, keep_log=keep,
                         max_body=max_body, drain_s=drain, limits=dataclasses.asdict(limits), quiet=quiet)
        names = [*loaded.config.backends, *loaded.config.consortia]
        shown = f"[{host}]" if ":" in host else host
        auth = f"on (keys: {', '.join(keys)})" if keys else "off (loopback)"  # names only, never a key
        if workers > 1:
            from router.server.workers import listening_sockets, supervise

            sockets = listening_sockets(host, port, workers)
            url = f"http://{shown}:{sockets[0].getsockname()[1]}"
            out.info(f"route serve: {url}/v1 · web view {url}/ui · config {loaded.path} · "
                     f"models: auto, {', '.join(names)} · auth {auth} · log {'on' if keep else 'off'} · "
                     f"{workers} workers")
            supervise(spec, sockets, workers)
            return
        from backends.threaded_server import bind_socket

        sock = bind_socket(host, port)
        router = serving_router(loaded, keep_log=keep, api_key_env=api_key_env)
        url = f"http://{shown}:{sock.getsockname()[1]}"
        out.info(f"route serve: {url}/v1 · web view {url}/ui · config {loaded.path} · models: auto, "
                 f"{', '.join(names)} · auth {auth} · "
                 f"log {'on: ' + router.request_log.where if router.request_log else 'off'}")
        run_server(router, spec, sock)

    log_group = typer.Typer(help="The request log (CLI, Python API and server alike): the last requests, or one "
                                 "in full with `route log show ID`.", invoke_without_command=True)
    app.add_typer(log_group, name="log")

    @log_group.callback()
    @handle_errors
    def log(
        ctx: typer.Context,
        limit: Annotated[int, typer.Option("-n", "--limit", min=1, help="How many, newest first.")] = 20,
        backend: Annotated[str | None, typer.Option("--backend", help="Only this backend.")] = None,
        status: Annotated[str | None, typer.Option("--status", help="ok, error or cancelled.")] = None,
        since: Annotated[str | None, typer.Option("--since", help="Only this recent: 30m, 1h, 2d.")] = None,
        json_output: Annotated[bool, typer.Option("--json", help="One JSON object per line, prompts and answers included.")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config")] = None,
    ) -> None:
        from backends.errors import UsageError

        if ctx.invoked_subcommand is not None:
            return
        if status is not None and status not in _STATUSES:
            raise UsageError(f"--status {status!r} is not one the log records; use ok, error or cancelled.")
        out = Output(json_mode=json_output)
        store = _store(config)
        with store.guard():
            rows = store.recent(limit, backend=backend, status=status, since_ts=_since(since))
        if json_output:
            for row in rows:
                out.data(row)
            return
        if not rows:
            out.info("the request log is empty for this filter; requests are logged unless --no-log or `log: {enabled: false}`")
            return
        out.out.print(_log_table(rows))
        out.info("[dim]`route log show ID` prints one request in full; --json has every field.[/]")

    @log_group.command("show", help="One request in full: prompt, answer, decision, timings, cost.")
    @handle_errors
    def log_show(
        request_id: Annotated[int, typer.Argument(metavar="ID", help="The id `route log` shows.")],
        json_output: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config")] = None,
    ) -> None:
        from backends.errors import UsageError

        out = Output(json_mode=json_output)
        store = _store(config)
        with store.guard():
            row = store.get(request_id)
        if row is None:
            raise UsageError(f"no request {request_id} in the request log; `route log` lists the recent ones.")
        if json_output:
            out.data(row)
            return
        _show_request(out, row)

    @app.command("stats", help="Per backend: requests, share, p50/p95 latency, time to first token, tokens/s, "
                               "cost, error rate, and the total spend, from the request log.")
    @handle_errors
    def stats(
        since: Annotated[str | None, typer.Option("--since", help="Only this recent: 30m, 1h, 2d.")] = None,
        plot: Annotated[str | None, typer.Option("--plot", help="Also draw latency per backend to this image file.")] = None,
        json_output: Annotated[bool, typer.Option("--json")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config")] = None,
    ) -> None:
        from router.config_loader import load_config
        from router.store.stats import summarize, summarize_tiers

        out = Output(json_mode=json_output)
        loaded = load_config(config)
        store = _store(config)
        with store.guard():
            rows = store.stat_rows(since_ts=_since(since))
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
        elif not summary:
            out.info("no requests logged in this window")
        else:
            window = f"last {since}" if since else "all time"
            out.out.print(_stats_table(summary, window, total))
            if tiers:
                out.out.print(_tiers_table(tiers, window))
            if cap is not None:
                out.info(f"spend cap: ${cap:g} per {loaded.config.spend.window_days:g} days (spend.cap_usd)")
        if shadow is not None and not json_output:
            out.out.print(f"shadow judging (routing.learn): ${shadow['today_usd']:.4f} today (UTC) of "
                          f"${shadow['budget_usd_per_day']:g} a day, {shadow['today_calls']} calls; "
                          f"${shadow['total_usd']:.4f} all days, {shadow['total_calls']} calls")
        if plot:
            out.info(f"latency plot written to {plot}")
