"""`route chat`: a conversation at the terminal, as `llm chat` is, routed as one session.

Every turn goes through `Router.session()` under the conversation's id: the task's tier only
moves up, on evidence (policies/sessions.py), and the session keeps its backend while it is
healthy. The answer streams to stdout; one line per turn on stderr says the tier, who answered,
the time, the turn's cost and the conversation's, and why. Each turn is in the request log under
the conversation's id (`route log --cid ID`); `route chat --continue` and `route --continue
"..."` go on with it.

Typed at the prompt:

    exit, quit, Ctrl-D          leave
    Ctrl-C                      stop the answer being written (the turn is left out); at the
                                prompt, drop the line being typed
    !multi ... !end             several lines as one message (`!multi abc` ends at `!end abc`)
    a line ending in \\          the message goes on on the next line
    !model NAME, !model auto    pin a backend or consortium; route again
    !models, !help              what can be pinned; these commands
(`/model`, `/help` ... work too.)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, NoLog, Quiet
from router.cli.output import Output

__all__ = ["Typed", "app", "chat", "read_message"]

app = command_app()

_LEAVE = frozenset({"exit", "quit"})
_PROMPT, _MORE = "> ", "... "
_HELP = ("exit, quit or Ctrl-D leave; Ctrl-C stops an answer. !multi ... !end sends several lines "
         "(or end a line with \\); !model NAME pins a backend or consortium, !model auto routes again; "
         "!models lists them.")


@dataclass(frozen=True, slots=True)
class Typed:
    """One message as typed: `single` when it was one line (only such a line can be a command)."""

    text: str
    single: bool


def read_message(read: Callable[[str], str]) -> Typed:
    """The next message, read a line at a time by `read(prompt)` (`input`): one line; lines
    ending in a backslash and the next; or `!multi [MARK]` ... `!end [MARK]` (EOFError at the
    end of input, from `read`)."""
    line = read(_PROMPT)
    words = line.split()
    if words and words[0] in ("!multi", "/multi") and len(words) <= 2:
        end = " ".join(["!end", *words[1:]])
        lines: list[str] = []
        while (more := read(_MORE)).strip() not in (end, end.replace("!", "/", 1)):
            lines.append(more)
        return Typed("\n".join(lines), False)
    parts = []
    while line.endswith("\\"):
        parts.append(line[:-1])
        line = read(_MORE)
    return Typed("\n".join([*parts, line]), not parts)


class _Chat:
    """The conversation, its session, what is pinned, and what it has cost."""

    def __init__(self, router: Any, out: Output, conversation: Any, options: dict[str, Any], pinned: str | None,
                 system: str | None):
        import asyncio

        self.router, self.out, self.conversation = router, out, conversation
        self.session = router.session(conversation.cid)
        self.options, self.pinned = options, pinned
        self.system = [{"role": "system", "content": system}] if system else []
        self.runner = asyncio.Runner()  # one loop for the whole chat: its connections are reused

    def close(self) -> None:
        with self.runner:
            self.runner.run(self.router.aclose())

    # -- commands --------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run `line` if it is a chat command (`!word` or `/word`); False when it is a message."""
        words = line.split()
        if not words or words[0][:1] not in "!/" or words[0][1:] not in ("model", "models", "help"):
            return False
        name, args = words[0][1:], words[1:]
        if name == "help":
            self.out.info(_HELP)
        elif name == "models":
            self.out.info("can be pinned: " + ", ".join(self.router.names()))
        else:
            self._pin(args)
        return True

    def _pin(self, args: list[str]) -> None:
        from rich.markup import escape

        if not args:
            self.out.info(f"pinned to {escape(self.pinned)}" if self.pinned else "routed (nothing pinned)")
            return
        name = args[0]
        if name in ("auto", "none", "off"):
            self.pinned = None
            self.out.info("routed again: the conversation's session picks the tier and backend")
            return
        unknown = _unknown(name, self.router.names())
        if unknown:
            self.out.error(unknown + " !models lists them.", kind="UsageError")
            return
        self.pinned = name
        self.out.info(f"pinned to {escape(name)}: every turn goes there until !model auto")

    # -- a turn ----------------------------------------------------------------------------

    def turn(self, text: str) -> None:
        """Ask; the answer streams to stdout, then the turn's line on stderr. A turn that was
        stopped (Ctrl-C) or failed is left out of the conversation."""
        from backends.errors import AllBackendsFailed, RouteError

        messages = self.conversation.messages
        messages.append({"role": "user", "content": text})
        options = {**self.options, "model": self.pinned}
        self.conversation.recall(self.router)
        try:
            result = self.runner.run(self._answer([*self.system, *messages], options))
        except KeyboardInterrupt:
            self.out.text("\n")
            self.out.info("[dim](answer stopped; that turn is left out of the conversation)[/]")
            messages.pop()
            return
        except AllBackendsFailed as exc:
            self._report(exc)
            messages.pop()
            return
        except RouteError as exc:
            self.out.error(str(exc), kind=type(exc).__name__)
            messages.pop()
            return
        messages.append({"role": "assistant", "content": result.text})
        self.conversation.cost_usd += result.completion.cost_usd
        self.conversation.answered(result, self.router)
        self._show(result)

    async def _answer(self, messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
        from backends.types import FinalChunk, TextChunk
        from router.request_context import CONVERSATION

        CONVERSATION.set(self.conversation.cid)  # a pinned turn has no session plan: the log files it here
        stream = self.session.astream(messages, **options)
        async with contextlib.aclosing(stream.__aiter__()) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextChunk):
                    self.out.text(chunk.text)
                elif isinstance(chunk, FinalChunk):
                    self.out.text("\n")
        return stream.result

    def _report(self, exc: Any) -> None:
        from router.cli.hints import failure_hints

        self.out.error(str(exc), kind=type(exc).__name__)
        for hint in failure_hints(exc.exceptions, self.router.config.backends, None):
            self.out.info(f"hint: {hint}")

    def _show(self, result: Any) -> None:
        from rich.markup import escape

        self.out.info("[dim]" + escape(turn_line(result, self.conversation.turns, self.conversation.cost_usd)) + "[/]")
        trace = result.completion.metadata.get("trace")
        if isinstance(trace, dict):  # a consortium answered: what its arbiter decided, as `route "..."` says it
            from router.cli.verdicts import verdict_lines

            for line in verdict_lines(trace):
                self.out.info(escape(line))
        lost = result.completion.metadata.get("degraded")
        if lost:  # even with -q, as `route "..."` says it: the answer is weaker than the config promised
            self.out.warn(f"degraded answer: {lost[0]}")
        if result.downgrade_note:
            self.out.warn(result.downgrade_note)


def _unknown(name: str, names: list[str]) -> str | None:
    """What is wrong with pinning `name`, or None when it can be pinned."""
    if name in names:
        return None
    import difflib

    close = difflib.get_close_matches(name, names, n=2)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return f"no backend or consortium {name!r} in this config.{hint}"


def turn_line(result: Any, turn: int, total_usd: float) -> str:
    """`turn 3 · tier 'strong' · hosted · 0.41 s · $0.000120, $0.000310 so far · why`."""
    decision, completion = result.decision, result.completion
    if decision.forced:
        where, why = "pinned", f"!model {decision.chosen}"
    else:
        where = f"tier {decision.tier!r}"
        why = decision.session.why if decision.session is not None else decision.reason
    parts = [f"turn {turn}", where, completion.backend, f"{completion.timings.total_s:.2f} s",
             f"${completion.cost_usd:.6f}, ${total_usd:.6f} so far", why]
    if completion.metadata.get("simulated"):
        parts.append("SIMULATED")
    return " · ".join(parts)


def _talk(chat: _Chat, read: Callable[[str], str]) -> None:
    """Read and answer until exit, quit or the end of input."""
    while True:
        try:
            typed = read_message(read)
        except EOFError:
            if sys.stdin.isatty():
                chat.out.text("\n")  # the prompt's line, ended
            return
        except KeyboardInterrupt:  # at the prompt: the line is dropped, as a shell does
            chat.out.text("\n")
            chat.out.info("[dim](exit, quit or Ctrl-D leave)[/]")
            continue
        text = typed.text
        if typed.single and (text.strip().lower() in _LEAVE):
            return
        if typed.single and chat.command(text.strip()):
            continue
        if text.strip():
            chat.turn(text)


def _reader() -> Callable[[str], str]:
    """`input`, with line editing and history where stdin is a terminal; without prompts where it
    is not (a script typed ahead): stdout then holds the answers alone."""
    if not sys.stdin.isatty():
        return lambda prompt: input()
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (importing it gives input() editing and history)
    return input


def _open(loaded: Any, continue_: bool, cid: str | None) -> Any:
    from router.cli.conversation import Conversation, new_id, resume

    if not (continue_ or cid):
        return Conversation(new_id())
    from router.store.choice import open_log

    return resume(open_log(loaded), cid)


@app.command("chat", help="A conversation at the terminal, routed as one session (its tier only moves up, on "
                          "evidence); --continue goes on with the last one.")
@handle_errors
def chat(
    model: Annotated[str | None, typer.Option("-m", "--model", help="Pin a backend or consortium (`!model auto` "
                                                                    "routes again).")] = None,
    system: Annotated[str | None, typer.Option("-s", "--system", help="A system prompt.")] = None,
    continue_: Annotated[bool, typer.Option("--continue", "-C", help="Go on with the last conversation in the "
                                                                     "request log.")] = False,
    cid: Annotated[str | None, typer.Option("--cid", help="Go on with this conversation (`route log --cid ID` "
                                                          "shows its turns).")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, help="Most tokens in each answer.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", min=0.0, max=2.0,
                                                      help="Sampling temperature.")] = None,
    prefer: Annotated[str | None, typer.Option(
        "--prefer", help="fast | cheap | best: what to optimise among backends that meet the deadline.")] = None,
    config: Config = None,
    quiet: Quiet = False,
    no_log: NoLog = False,
) -> None:
    from rich.markup import escape

    from router.cli.commands.ask import open_router
    from router.config_loader import load_config

    out = Output(quiet=quiet)
    loaded = load_config(config)
    conversation = _open(loaded, continue_, cid)
    router = open_router(loaded, out, no_log=no_log)
    if model is not None and _unknown(model, router.names()):
        from backends.errors import UsageError

        raise UsageError(f"-m: {_unknown(model, router.names())} `route models` lists them.")
    conversation.seed(router)
    chat = _Chat(router, out, conversation, dict(max_tokens=max_tokens, temperature=temperature, prefer=prefer),
                 None, system)
    earlier = f", {conversation.turns} earlier turns" if conversation.turns else ""
    out.info(f"[dim]conversation {escape(conversation.cid)}{escape(earlier)}, routed as one session. "
             f"{escape(_HELP)}[/]")
    if model is not None:
        chat.command(f"!model {model}")
    try:
        _talk(chat, _reader())
    finally:
        chat.close()
    if conversation.turns and not no_log:
        out.info(f"[dim]`route log --cid {escape(conversation.cid)}` shows its turns; `route chat --continue` or "
                 f'`route --continue "..."` goes on with it.[/]')
