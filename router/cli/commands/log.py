"""`route log` and `route log show ID`: the last requests of the request log, or one in full."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.log_store import fmt, open_store, since_ts, when
from router.cli.options import Config, Json, JsonLines, Since
from router.cli.output import Output

__all__ = ["app", "log", "log_show"]

app = command_app("log", help="The request log (CLI, Python API and server alike): the last requests, or one "
                              "in full with `route log show ID`.", invoke_without_command=True)


_STATUSES = ("ok", "error", "cancelled")


def _failed_all(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every backend a failed request tried, in order, when none answered (the row's `backend`
    is then only the last one tried, which did not answer either)."""
    failures = (row.get("decision") or {}).get("failures") or []
    return failures if row["status"] == "error" and row.get("answer") is None else []


def _backend(row: dict[str, Any], *, full: bool) -> str:
    failed = _failed_all(row)
    if not failed:
        return f"{row.get('backend') or '-'} ({row.get('model') or '-'})" if full else row.get("backend") or "-"
    if not full:
        return f"none ({len(failed)} failed)"
    tried = ", ".join(f"{f.get('backend')} ({f.get('error')})" for f in failed)
    return f"none answered; tried {tried}"


def _request_facts(row: dict[str, Any]) -> list[tuple[str, Any]]:
    decision = row.get("decision") or {}
    error = f": {row.get('error_type')}: {row.get('error')}" if row.get("error") else ""
    return [("id", row["id"]), ("time", when(row["ts"])), ("source", row["source"]),
            ("asked for", row.get("requested") or "-"), ("backend", _backend(row, full=True)),
            ("status", row["status"] + error), ("reason", decision.get("reason") or "-"),
            ("tokens", f"{fmt(row.get('input_tokens'), 'd')} in, {fmt(row.get('output_tokens'), 'd')} out"),
            ("time taken", f"{fmt(row.get('total_s'), '.2f')} s (first token {fmt(row.get('ttft_s'), '.2f')} s)"),
            ("cost", f"${fmt(row.get('cost_usd'), '.6f')}"), ("trace", row.get("trace_id") or "-"),
            ("session", row.get("session") or "-"),
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


def _log_table(rows: list[dict[str, Any]], title: str = "request log (newest first)"):
    """Fits 80 columns: names never cut, the prompt takes what is left (in full: `route log show ID`)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    # Every column but the prompt keeps its width; the prompt gets the rest, cut to one line.
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
    for column in ("id", "time", "backend", "status", "tok", "s", "$"):
        table.add_column(column, justify="left" if column in ("time", "backend", "status") else "right",
                         no_wrap=column != "backend", overflow="fold", min_width=12 if column == "backend" else None)
    table.add_column("prompt", overflow="ellipsis", max_width=60)
    for r in rows:
        status = r["status"] if r["status"] == "ok" else f"[red]{r['status']}[/]"
        prompt = " ".join((r.get("prompt") or "").split())
        table.add_row(str(r["id"]), when(r["ts"], short=True), escape(_backend(r, full=False)), status,
                      fmt(r.get("output_tokens"), "d"), fmt(r.get("total_s"), ".2f"),
                      fmt(r.get("cost_usd"), ".4f"), escape(prompt[:24] + ("…" if len(prompt) > 24 else "")))
    return table


@app.callback()
@handle_errors
def log(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("-n", "--limit", min=1, help="How many, newest first.")] = 20,
    backend: Annotated[str | None, typer.Option("--backend", help="Only this backend.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="ok, error or cancelled.")] = None,
    since: Since = None,
    cid: Annotated[str | None, typer.Option("--cid", help="Only this conversation's turns (`route chat` names "
                                                          "it), or a session's requests.")] = None,
    json_output: JsonLines = False,
    config: Config = None,
) -> None:
    from backends.errors import UsageError

    if ctx.invoked_subcommand is not None:
        return
    if status is not None and status not in _STATUSES:
        raise UsageError(f"--status {status!r} is not one the log records; use ok, error or cancelled.")
    out = Output(json_mode=json_output)
    store = open_store(config)
    with store.guard():
        rows = store.recent(limit, backend=backend, status=status, since_ts=since_ts(since), session=cid)
    if json_output:
        for row in rows:
            out.data(row)
        return
    if not rows:
        out.info("the request log is empty for this filter; requests are logged unless --no-log or `log: {enabled: false}`")
        return
    out.out.print(_log_table(rows, f"conversation {cid} (newest first)" if cid else "request log (newest first)"))
    out.info("[dim]`route log show ID` prints one request in full; --json has every field.[/]")


@app.command("show", help="One request in full: prompt, answer, decision, timings, cost.")
@handle_errors
def log_show(
    request_id: Annotated[int, typer.Argument(metavar="ID", help="The id `route log` shows.")],
    json_output: Json = False,
    config: Config = None,
) -> None:
    from backends.errors import UsageError

    out = Output(json_mode=json_output)
    store = open_store(config)
    with store.guard():
        row = store.get(request_id)
    if row is None:
        raise UsageError(f"no request {request_id} in the request log; `route log` lists the recent ones.")
    if json_output:
        out.data(row)
        return
    _show_request(out, row)
