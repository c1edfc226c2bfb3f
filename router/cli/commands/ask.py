"""`route "prompt"`: ask the router, stream the answer to stdout, report the decision on stderr."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json, NoLog, Quiet
from router.cli.output import Output
from router.cli.startup import ends_startup_itself, resume_collection

__all__ = ["app", "ask", "open_router"]

app = command_app()


def _piped() -> str | None:
    """What was piped into stdin, or None for a terminal, a closed stdin or no data (/dev/null)."""
    if _piped_nothing():
        return None
    try:
        return sys.stdin.read()
    except (OSError, ValueError):
        return None


def _piped_nothing() -> bool:
    """No stdin to read: none, closed, or a terminal (where reading would wait for typing)."""
    return sys.stdin is None or sys.stdin.closed or sys.stdin.isatty()


def _read_prompt(prompt: str | None, config: str | None = None) -> str:
    """The argument, then a blank line and stdin when text was piped in (`llm` combines the same
    two, stdin first; the instruction first reads better to a model); stdin alone when there is no
    argument or it is '-'. A prompt with nothing but whitespace is
    refused: a model would be paid to answer nothing."""
    from backends.errors import UsageError

    argument = prompt if prompt != "-" else None
    if argument is None and _piped_nothing():
        raise UsageError(_taken_as_config(config) or 'no prompt given: write `route "your prompt"`, or pipe text '
                         'in: `echo "..." | route`.')
    parts = [p for p in (argument, _piped()) if p and p.strip()]
    if not parts:
        raise UsageError(_empty(argument is not None, config))
    return "\n\n".join(parts)


def _empty(from_argument: bool, config: str | None) -> str:
    where = "the prompt" if from_argument else "the prompt read from stdin"
    return (None if from_argument else _taken_as_config(config)) or (
        f"{where} is empty; pass some text as an argument or pipe it in (`route \"Summarise this\" < file` sends "
        "both).")


def _taken_as_config(config: str | None) -> str | None:
    """Why there is no prompt when -c's value names no file: `route -c "and now in French?"` is
    llm's continue typed here, where -c is --config, so the text was taken for a config path."""
    from pathlib import Path

    if config is None or Path(config).expanduser().is_file():
        return None
    import shlex

    return (f"no prompt given: -c is --config here, so {config!r} was taken as the path of a config file "
            f"(there is none). To go on with the last conversation, write `route --continue "
            f"{shlex.quote(config)}` (or -C); to ask it afresh, `route {shlex.quote(config)}`.")


def _messages(prompt: str, system: str | None, earlier: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, *(earlier or ()), {"role": "user", "content": prompt}]


def _conversation(loaded, continue_: bool, cid: str | None):
    """The conversation --continue or --cid goes on with (router/cli/conversation.py), or None."""
    if not (continue_ or cid):
        return None
    from router.cli.conversation import resume
    from router.store.choice import open_log

    return resume(open_log(loaded), cid)


def _join(router, conversation) -> str | None:
    """Route this call as the conversation's next turn: its session, at the tier it had reached;
    a forced (-m) turn is logged under it too. Returns the session id."""
    if conversation is None:
        return None
    from router.request_context import CONVERSATION

    conversation.seed(router)
    CONVERSATION.set(conversation.cid)
    return conversation.cid


def _show_decision(out: Output, decision) -> None:
    from rich.markup import escape

    if decision.forced:
        out.info(f"[dim]→ {escape(decision.chosen)} ({escape(decision.reason)})[/]")
        return
    fallback = f"; fallback {', '.join(decision.candidates[1:])}" if len(decision.candidates) > 1 else ""
    out.info(f"[dim]→ {escape(decision.chosen)} · {escape(decision.reason)}{escape(fallback)}[/]")


def _show_explain(out: Output, decision) -> None:
    if out.json_mode:
        out.data(decision.as_dict(task=True))
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
        out.out.print(_candidate_table(rows, decision.details.get("hedge_after_s") or {}, decision.deadline_s))


def _decision_rows(decision) -> list[tuple[str, str]]:
    rows = [("chosen", decision.chosen), ("reason", decision.reason),
            ("fallbacks", ", ".join(decision.candidates[1:]) or "-")]
    if decision.deadline_s is not None:
        rows.append(("deadline", f"{decision.deadline_s:.3f} s"))
    if decision.task is not None:
        rows.append(("scored", decision.task.describe()))
    if decision.score is not None:
        rows.append(("score", f"{decision.score.value:.4f} ({decision.score.scorer})"))
        rows += [(f"  {name}", f"{contribution:+.4f}  (value {_number(decision.score.features.get(name))})")
                 for name, contribution in decision.score.top(6)]
    rows += [(f"boundary {c.lower}|{c.upper}", f"{c.head}: {c.score:.4f} {'>=' if c.up else '<'} {c.threshold:.4f} "
              f"-> {'up' if c.up else 'stay'}") for c in decision.crossings]
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


def _candidate_table(rows: list[dict[str, Any]], hedges: dict[str, float], deadline_s: float | None):
    """Predicted time and cost per candidate, in the order they would be tried. Fits 80 columns
    without cutting a word: columns with nothing to say (no deadline, no hedging) are left out,
    and a downgrade goes on a line of its own under the tier; every value is in --json."""
    from rich import box
    from rich.table import Table

    deadline = deadline_s is not None or any(r.get("rate_limit") for r in rows)
    columns = ["backend", "tier", "p50/p95 s", "cost $", *(["deadline"] if deadline else []), "breaker", "n",
               *(["hedge s"] if hedges else [])]
    table = Table(title="candidates, in order (predicted from measured latency, or config priors)",
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for column in columns:
        table.add_column(column, justify="left" if column in ("backend", "tier", "deadline", "breaker") else "right",
                         no_wrap=column != "tier")
    for row in rows:
        table.add_row(*_candidate_cells(row, deadline, hedges))
    return table


def _candidate_cells(row: dict[str, Any], deadline: bool, hedges: dict[str, float]) -> list[str]:
    cells = [row["backend"], _tier_cell(row), _times_cell(row), f"{row['cost_usd']:.6f}" if "cost_usd" in row else "-"]
    if deadline:
        cells.append(_deadline_cell(row))
    cells += [row.get("breaker", "-"), str(row.get("samples", 0))]
    if hedges:
        cells.append(f"{hedges[row['backend']]:.3f}" if row["backend"] in hedges else "-")
    return cells


def _tier_cell(row: dict[str, Any]) -> str:
    tier = row.get("tier") or "-"
    return f"{tier}\n(downgrade)" if row.get("downgrade") else tier


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _times_cell(row: dict[str, Any]) -> str:
    if not row.get("known", True):
        return "unknown"
    return f"{_seconds(row['p50_s'])}/{_seconds(row['p95_s'])}"


def _deadline_cell(row: dict[str, Any]) -> str:
    meets = row.get("meets_deadline")
    if row.get("rate_limit"):
        return "rate limit"
    if meets is None:
        return "-"
    return "meets" if meets else "may meet" if row.get("could_meet_deadline") else "misses"


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
    if isinstance(c.metadata.get("trace"), dict):  # a consortium answered: what its arbiter decided
        from rich.markup import escape

        from router.cli.verdicts import verdict_lines

        for line in verdict_lines(c.metadata["trace"]):
            out.info(escape(line))


async def _ask(router, out: Output, messages, *, stream: bool, options: dict[str, Any],
               show_thinking: bool = False) -> None:
    from backends.types import FinalChunk, TextChunk, ThinkingChunk

    if not stream or out.json_mode:
        result = await router.acomplete(messages, **options)
        if out.json_mode:
            out.data(_with_degraded(result.as_dict(), result.completion))
        else:
            if show_thinking and result.completion.thinking:
                out.thinking(result.completion.thinking + "\n")
            out.text(result.text, end="\n")
            _show_stats(out, result.completion)
        _warn_degraded(out, result.completion)
        _warn_downgraded(out, result)
        return
    thinking = False  # a thought is being printed: end its line before the answer starts
    route_stream = router.astream(messages, **options)
    async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, ThinkingChunk):
                if show_thinking and chunk.text:
                    out.thinking(chunk.text)
                    thinking = True
                continue
            if thinking and isinstance(chunk, (TextChunk, FinalChunk)):
                out.thinking("\n")
                thinking = False
            if isinstance(chunk, TextChunk):
                out.text(chunk.text)
            elif isinstance(chunk, FinalChunk):
                out.text("\n")
                _show_stats(out, chunk.completion)
                _warn_degraded(out, chunk.completion)
                _warn_downgraded(out, route_stream.result)  # set before the FinalChunk
            # DraftChunks are for the --watch view only


def _with_degraded(doc: dict[str, Any], completion) -> dict[str, Any]:
    return {**doc, "degraded": list(completion.metadata.get("degraded") or [])}


def _warn_degraded(out: Output, completion) -> None:
    """One line on stderr, even with -q: the answer is weaker than the config promised."""
    lost = completion.metadata.get("degraded")
    if lost:
        more = f" (+{len(lost) - 1} more; --json has them all)" if len(lost) > 1 else ""
        out.warn(f"degraded answer: {lost[0]}{more}")


def _warn_downgraded(out: Output, result) -> None:
    """One line on stderr, even with -q: a weaker tier than the prompt's answered, and why."""
    note = result.downgrade_note if result is not None else None
    if note:
        out.warn(note)


def _report_failure(out: Output, exc, backends, deadline_s: float | None) -> None:
    from router.cli.hints import failure_hints

    out.error(str(exc), kind=type(exc).__name__)  # RateLimitExceeded says when to retry
    for hint in failure_hints(exc.exceptions, backends, deadline_s):
        out.info(f"hint: {hint}")


async def _run(router, out: Output, messages, options: dict[str, Any], *, stream: bool, watch: bool,
               label: str, show_thinking: bool = False) -> None:
    """The request on one event loop; Ctrl-C cancels this task, so every call it made is cancelled."""
    try:
        if watch:
            from router.cli.watch import watch_answer

            result = await watch_answer(router, out, messages, options, _show_stats, label=label,
                                        show_thinking=show_thinking)
            if result is not None:
                _warn_degraded(out, result.completion)
                _warn_downgraded(out, result)
        else:
            await _ask(router, out, messages, stream=stream, options=options, show_thinking=show_thinking)
    finally:
        await router.aclose()


def _run_request(coroutine) -> None:
    """Run `coroutine`; on Ctrl-C its task is cancelled (asyncio.Runner's SIGINT handling), the
    cancellation reaches every backend call, and KeyboardInterrupt follows once it has unwound."""
    import asyncio

    with asyncio.Runner() as runner:
        runner.run(coroutine)


@app.command("ask", help='Ask a question (the default: `route "prompt"` is `route ask "prompt"`).')
@handle_errors
@ends_startup_itself
def ask(
    prompt: Annotated[str | None, typer.Argument(help="The prompt; omit or '-' to read stdin.")] = None,
    model: Annotated[str | None, typer.Option("-m", "--model", help="Force a backend or consortium by name.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the routing decision; call no model.")] = False,
    json_output: Json = False,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream the answer as it arrives.")] = True,
    system: Annotated[str | None, typer.Option("-s", "--system", help="A system prompt.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Most tokens in the answer.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", min=0.0, max=2.0,
                                                      help="Sampling temperature.")] = None,
    deadline: Annotated[str | None, typer.Option("--deadline", help="Whole-request deadline: 500ms, 2s, 1m.")] = None,
    prefer: Annotated[str | None, typer.Option(
        "--prefer", help="fast | cheap | best: what to optimise among backends that meet the deadline.")] = None,
    config: Config = None,
    quiet: Quiet = False,
    watch: Annotated[bool, typer.Option("--watch", help="Diffusion backends: show the canvas denoising in place.")] = False,
    no_log: NoLog = False,
    show_thinking: Annotated[bool, typer.Option(
        "--show-thinking", help="Print the model's thinking, dimmed, on stderr before the answer (stdout keeps "
                                "the answer alone; --json always has it under `thinking`).")] = False,
    continue_: Annotated[bool, typer.Option(
        "--continue", "-C", help="Go on with the last conversation in the request log (`route chat`'s, or the "
                                 'last `route "..."`): this prompt is its next turn.')] = False,
    cid: Annotated[str | None, typer.Option("--cid", help="Go on with this conversation (`route log --cid ID` "
                                                          "shows its turns).")] = None,
) -> None:
    from router.cli.durations import parse_duration
    from router.config_loader import load_config

    out = Output(json_mode=json_output, quiet=quiet)
    deadline_s = parse_duration(deadline) if deadline else None
    text = _read_prompt(prompt, config)
    loaded = load_config(config)
    conversation = _conversation(loaded, continue_, cid)
    messages = _messages(text, system, conversation.messages if conversation else None)
    router = open_router(loaded, out, no_log=no_log)
    session = _join(router, conversation)
    from router.deciding import Needs

    # The needs the call itself will check (router.acomplete), so --explain shows what will happen.
    decision = router.decide(messages, model=model, deadline_s=deadline_s, max_tokens=max_tokens, prefer=prefer,
                             needs=Needs.of(messages, {}, max_tokens), session=session)
    resume_collection()  # start-up is over; a long answer or consortium run collects as usual
    if explain:
        _show_explain(out, decision)
        return
    _show_decision(out, decision)
    options = dict(model=model, max_tokens=max_tokens, temperature=temperature, deadline_s=deadline_s,
                   prefer=prefer, session=session)
    _answer(router, out, messages, options, decision.chosen, stream=stream, watch=watch and not json_output,
            show_thinking=show_thinking)


def open_router(loaded, out: Output, *, no_log: bool):
    """The terminal's Router over `loaded`: the request log written unless `no_log`, learned
    latency kept between runs, rate limits other replicas used up read."""
    from router.core import Router

    # --no-log opens no file at all (nor imports the store); an unusable store is one warning,
    # then log and learning off.
    keep = False
    if not no_log:
        from router.store.choice import request_log_on

        keep = request_log_on(loaded, out, no_log=False)
    # Learned latency from earlier runs, saved again at close: consecutive runs learn together
    # (Redis needs no local file).
    router = Router(loaded, source="cli", log=None if keep else False,
                    persist=keep or loaded.config.state.backend == "redis")
    if router.persist_problem:
        out.info(f"[dim]latency history unavailable ({router.persist_problem}); routing on config priors[/]")
    _read_shared_limits(router)
    return router


def _read_shared_limits(router) -> None:
    """A new process knows nothing of rate-limit buckets kept in Redis: read them once, so the
    decision (and --explain) passes over a backend other replicas or runs have used up."""
    limiter = router.rate_limits
    if limiter.link is None or not limiter:
        return
    import asyncio

    async def read() -> None:
        try:
            await limiter.refresh()
        finally:
            await limiter.link.aclose()  # its client belongs to this short-lived loop

    asyncio.run(read())


def _answer(router, out: Output, messages, options: dict[str, Any], chosen: str, *, stream: bool,
            watch: bool, show_thinking: bool = False) -> None:
    """Run the request, with the consortium's live table when there is one to show."""
    from backends.errors import AllBackendsFailed
    from router.cli.errors import EXIT_NO_BACKEND

    view: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if chosen in router.config.consortia and not (out.json_mode or out.quiet):
        from router.cli.live import live_view  # members' progress, live on stderr

        view = live_view(router, chosen, out)
    try:
        with view:
            _run_request(_run(router, out, messages, options, stream=stream, watch=watch, label=chosen,
                              show_thinking=show_thinking))
    except AllBackendsFailed as exc:
        _report_failure(out, exc, router.config.backends, options.get("deadline_s"))
        raise typer.Exit(EXIT_NO_BACKEND) from None
