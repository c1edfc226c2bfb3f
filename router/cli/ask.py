"""`route "prompt"`: ask the router, stream the answer to stdout, report the decision on stderr."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from router.cli.output import Output

__all__ = ["register"]

_CONNECT_HINT = (
    "To connect a model: start an OpenAI-compatible server for DiffusionGemma (e.g. vLLM on "
    "127.0.0.1:8000), export the API key a hosted backend names (route models shows which), or "
    "run `route sim` in another terminal for a SIMULATED server on port 8000. Then retry; "
    "`route doctor` checks every backend."
)


def _read_prompt(prompt: str | None) -> str:
    from backends.errors import UsageError

    if prompt is not None and prompt != "-":
        return prompt
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError('no prompt given: write `route "your prompt"`, or pipe text in: `echo "..." | route`.')
    text = sys.stdin.read()
    if not text.strip():
        raise UsageError("the prompt read from stdin is empty; pipe in some text or pass it as an argument.")
    return text


def _messages(prompt: str, system: str | None) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": prompt}]


def _show_decision(out: Output, decision) -> None:
    from rich.markup import escape

    if decision.forced:
        out.info(f"[dim]→ {escape(decision.chosen)} ({escape(decision.reason)})[/]")
        return
    fallback = f"; fallback {', '.join(decision.candidates[1:])}" if len(decision.candidates) > 1 else ""
    out.info(f"[dim]→ {escape(decision.chosen)} · {escape(decision.reason)}{escape(fallback)}[/]")


def _show_explain(out: Output, decision) -> None:
    if out.json_mode:
        out.data(decision.as_dict())
        return
    from rich.table import Table

    table = Table(title="routing decision (no model was called)", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for name, value in _decision_rows(decision):
        table.add_row(name, value)
    out.out.print(table)
    rows = (decision.details or {}).get("candidates")
    if rows:
        out.out.print(_candidate_table(rows, decision.details.get("hedge_after_s") or {}))


def _decision_rows(decision) -> list[tuple[str, str]]:
    rows = [("chosen", decision.chosen), ("reason", decision.reason),
            ("fallbacks", ", ".join(decision.candidates[1:]) or "-")]
    if decision.deadline_s is not None:
        rows.append(("deadline", f"{decision.deadline_s:.3f} s"))
    if decision.score is not None:
        rows.append(("score", f"{decision.score.value:.4f} ({decision.score.scorer})"))
        rows += [(f"  {name}", f"{contribution:+.4f}  (value {_number(decision.score.features.get(name))})")
                 for name, contribution in decision.score.top(6)]
    downgrade = decision.downgrade
    if downgrade is not None:
        rows.append(("DOWNGRADE", f"tier {downgrade.from_tier} -> {downgrade.to_tier}: {downgrade.reason}"))
    # `why` is already part of the reason; candidates and hedge times get their own table
    skip = {"candidates", "why", "hedge_after_s", "downgrade"}
    rows += [(name, str(detail)) for name, detail in (decision.details or {}).items()
             if name not in skip and detail is not None]
    return rows


def _number(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else "-"


def _candidate_table(rows: list[dict[str, Any]], hedges: dict[str, float]):
    """Predicted time and cost per candidate, in the order they would be tried."""
    from rich.table import Table

    table = Table(title="candidates, in order (predicted from measured latency, or config priors)",
                  title_justify="left")
    for column in ("backend", "tier", "p50 s", "p95 s", "cost $", "deadline", "breaker", "samples", "hedge at s"):
        table.add_column(column, justify="left" if column in ("backend", "tier", "breaker") else "right")
    for row in rows:
        meets = row.get("meets_deadline")
        tier = row.get("tier") or "-"
        table.add_row(
            row["backend"], f"{tier} (downgrade)" if row.get("downgrade") else tier,
            *((f"{row['p50_s']:.3f}", f"{row['p95_s']:.3f}") if row.get("known", True) else ("?", "unknown")),
            f"{row['cost_usd']:.6f}" if "cost_usd" in row else "-",
            "-" if meets is None else ("meets" if meets else "may meet" if row.get("could_meet_deadline") else "misses"),
            row.get("breaker", "-"), str(row.get("samples", 0)),
            f"{hedges[row['backend']]:.3f}" if row["backend"] in hedges else "-",
        )
    return table


def _attach_latency_store(router, out: Output) -> None:
    """Learned latency from earlier runs, saved again at close: consecutive runs learn together."""
    problem = router.persist(warn=False)
    if problem:
        out.info(f"[dim]latency history unavailable ({problem}); routing on config priors[/]")


def _show_stats(out: Output, c) -> None:
    """One dim line on stderr: who answered, how much, how fast, what it cost."""
    parts = [c.backend, f"{c.usage.output_tokens} tok", f"{c.timings.total_s:.2f} s"]
    if c.timings.ttft_s is not None:
        parts.append(f"ttft {c.timings.ttft_s:.2f} s")
    if c.diffusion is not None and c.diffusion.tokens_per_forward:
        parts.append(f"{c.diffusion.tokens_per_forward:.1f} tok/forward")
    parts.append(f"${c.cost_usd:.6f}")
    if c.metadata.get("simulated"):
        parts.append("SIMULATED")
    out.info("[dim]" + " · ".join(parts) + "[/]")


def _ask(router, out: Output, messages, *, stream: bool, options: dict[str, Any]) -> None:
    from backends.types import FinalChunk, TextChunk

    if not stream or out.json_mode:
        result = router.complete(messages, **options)
        if out.json_mode:
            out.data(result.as_dict())
        else:
            out.text(result.text, end="\n")
            _show_stats(out, result.completion)
            if result.downgrade is not None:
                out.info(f"[yellow]DOWNGRADED[/] tier {result.downgrade.header()}: {result.downgrade.reason}")
        return
    for chunk in router.stream(messages, **options):
        if isinstance(chunk, TextChunk):
            out.text(chunk.text)
        elif isinstance(chunk, FinalChunk):
            out.text("\n")
            _show_stats(out, chunk.completion)
        # DraftChunks are for the --watch view only


def _report_failure(out: Output, exc) -> None:
    out.error(str(exc), kind="AllBackendsFailed")
    out.info(_CONNECT_HINT)


def register(app: typer.Typer) -> None:
    from router.cli.app import EXIT_NO_BACKEND, handle_errors

    @app.command("ask", help='Ask a question (the default: `route "prompt"` is `route ask "prompt"`).')
    @handle_errors
    def ask(
        prompt: Annotated[str | None, typer.Argument(help="The prompt; omit or '-' to read stdin.")] = None,
        model: Annotated[str | None, typer.Option("-m", "--model", help="Force a backend or consortium by name.")] = None,
        explain: Annotated[bool, typer.Option("--explain", help="Show the routing decision; call no model.")] = False,
        json_output: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
        stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream the answer as it arrives.")] = True,
        system: Annotated[str | None, typer.Option("-s", "--system", help="A system prompt.")] = None,
        max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1)] = None,
        temperature: Annotated[float | None, typer.Option("--temperature", min=0.0, max=2.0)] = None,
        deadline: Annotated[str | None, typer.Option("--deadline", help="Whole-request deadline: 500ms, 2s, 1m.")] = None,
        prefer: Annotated[str | None, typer.Option(
            "--prefer", help="fast | cheap | best: what to optimise among backends that meet the deadline.")] = None,
        config: Annotated[str | None, typer.Option("-c", "--config", help="Config file (default: search order).")] = None,
        quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only the answer; no notes on stderr.")] = False,
        watch: Annotated[bool, typer.Option("--watch", help="Diffusion backends: show the canvas denoising in place.")] = False,
        no_log: Annotated[bool, typer.Option("--no-log", help="Do not write this request to the request log.")] = False,
    ) -> None:
        from router.cli.durations import parse_duration
        from router.config_loader import load_config

        out = Output(json_mode=json_output, quiet=quiet)
        deadline_s = parse_duration(deadline) if deadline else None
        messages = _messages(_read_prompt(prompt), system)
        loaded = load_config(config)
        from router.core import Router
        from router.store import local_store_usable

        # --no-log opens no file at all; an unusable store is one warning, then log and learning off.
        keep = not no_log and local_store_usable(loaded.config, out)
        router = Router(loaded, source="cli", log=None if keep else False)
        if keep:
            _attach_latency_store(router, out)
        decision = router.decide(messages, model=model, deadline_s=deadline_s, max_tokens=max_tokens, prefer=prefer)
        if explain:
            _show_explain(out, decision)
            return
        _show_decision(out, decision)
        options = dict(model=model, max_tokens=max_tokens, temperature=temperature, deadline_s=deadline_s,
                       prefer=prefer)
        import contextlib

        from backends.errors import AllBackendsFailed

        view = contextlib.nullcontext()
        if decision.chosen in loaded.config.consortia and not (json_output or quiet):
            from router.cli.consortium_cmds import live_view  # members' progress, live on stderr

            view = live_view(router, decision.chosen, out)
        try:
            with view:
                if watch and not json_output:
                    from router.cli.watch import watch_answer

                    watch_answer(router, out, messages, options, _show_stats, label=decision.chosen)
                else:
                    _ask(router, out, messages, stream=stream, options=options)
        except AllBackendsFailed as exc:
            _report_failure(out, exc)
            raise typer.Exit(EXIT_NO_BACKEND) from None
        finally:
            router.close()
