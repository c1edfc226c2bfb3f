"""How `route ARGS...` is read: which command runs, and what is a prompt. It never guesses.

    route "Why is the sky blue?"         -> ask (a word that is no command is a prompt)
    route -c FILE models                 -> models -c FILE (global options go to the command)
    route models                         -> models;  route modles -> exit 2, did you mean `route models`
    route -m frontier models             -> exit 2: a command name is never sent as a prompt...
    route ask models / route -- models   -> ...unless asked for: both send the word "models"
    route keys                           -> a command of llm's (or another tool's), typed alone: asked
                                            first at a terminal, refused in a script (AskFirst)

Global options (`-c/--config FILE`, `-q/--quiet`, `--json`, `--no-log`) may stand before or after
the command; each is handed to the command if it takes it, and left out if it has no meaning
there (`route --no-log models`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["ELSEWHERE", "AskFirst", "NotAPrompt", "close_commands", "dispatch"]

DEFAULT_COMMAND = "ask"
PASSTHROUGH = frozenset({"--help", "-h", "--version", "--install-completion", "--show-completion"})
_GLOBAL_FLAGS = frozenset({"-q", "--quiet", "--json", "--no-log"})
_GLOBAL_VALUED = frozenset({"-c", "--config"})
_BARE_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# Commands of the tools a user of route knows (llm and its plugins, package managers, servers):
# one of these typed alone is far likelier a command reached for than a question for a model.
ELSEWHERE = frozenset({
    "keys", "logs", "history", "status", "help", "prompt", "templates", "aliases", "plugins", "install",
    "uninstall", "embed", "similar", "collections", "schemas", "tools", "fragments", "openai", "cmd", "list", "ls",
    "login", "logout", "whoami", "version", "setup", "start", "stop", "restart", "update", "upgrade", "info",
    "exit", "quit",
})


class NotAPrompt(Exception):
    """A bare word that names (or nearly names) a command stood where a prompt goes."""


class AskFirst(NotAPrompt):
    """The prompt is one `word` that is a command elsewhere (ELSEWHERE). `routed`: the arguments
    that send it as a prompt, should the user say so."""

    def __init__(self, message: str, word: str, routed: list[str]):
        super().__init__(message)
        self.word, self.routed = word, routed


# Commands and groups are read by duck typing (`params`, `commands`): typer may bring its own
# copy of click, whose classes are not the installed click's.
Command = Any


def _distance(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions counting one (optimal string alignment)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            best = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, prev2[j - 2] + 1)
            row.append(best)
        prev2, prev = prev, row
    return prev[-1]


def close_commands(word: str, commands: Iterable[str]) -> list[str]:
    """Commands `word` is, or is within reach of: edit distance 2, or 1 for names of up to five
    letters (else "hi" would be `sim` and "ok" `log`)."""
    word = word.lower()
    found = []
    for name in commands:
        reach = 2 if len(name) > 5 else 1
        distance = _distance(word, name)
        if distance <= reach:
            found.append((distance, name))
    return [name for _, name in sorted(found)]


def _options(command: Command) -> list[Any]:
    return [p for p in getattr(command, "params", ()) if getattr(p, "param_type_name", None) == "option"]


def _takes_value(command: Command) -> set[str]:
    """The option strings of `command` that take a value (whose next token is not an argument)."""
    names: set[str] = set()
    for param in _options(command):
        if not param.is_flag and not getattr(param, "count", False):
            names.update(param.opts)
    return names


def _declared(command: Command) -> set[str]:
    return {opt for param in _options(command) for opt in [*param.opts, *param.secondary_opts]}


def _leading_globals(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Global options at the front, and the rest."""
    found: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token in _GLOBAL_FLAGS or token.startswith("--config="):
            found.append(token)
            i += 1
        elif token in _GLOBAL_VALUED and i + 1 < len(args):
            found += [token, args[i + 1]]
            i += 2
        else:
            break
    return found, list(args[i:])


def _split_globals(args: Sequence[str], valued: set[str]) -> tuple[list[str], list[str]]:
    """Global options anywhere before `--` (not as another option's value), and the rest."""
    found: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            rest += args[i:]
            break
        if token in _GLOBAL_FLAGS or token.startswith("--config="):
            found.append(token)
        elif token in _GLOBAL_VALUED and i + 1 < len(args):
            found += [token, args[i + 1]]
            i += 1
        elif token in valued and i + 1 < len(args):
            rest += [token, args[i + 1]]
            i += 1
        else:
            rest.append(token)
        i += 1
    return found, rest


def _keep_declared(found: list[str], command: Command) -> list[str]:
    """Global options `command` takes; the others have no meaning there and are left out."""
    declared = _declared(command)
    kept: list[str] = []
    i = 0
    while i < len(found):
        token = found[i]
        name = token.split("=", 1)[0]
        width = 2 if token in _GLOBAL_VALUED else 1
        if name in declared:
            kept += found[i:i + width]
        i += width
    return kept


def _positionals(args: Sequence[str], valued: set[str]) -> list[str]:
    """The arguments that are not options or option values, up to `--`."""
    words: list[str] = []
    skip = False
    for token in args:
        if skip:
            skip = False
        elif token == "--":
            break
        elif token.startswith("-") and token != "-":
            skip = token in valued
        else:
            words.append(token)
    return words


def _refuse_command_words(words: Sequence[str], commands: Sequence[str]) -> None:
    for word in words:
        if not _BARE_WORD.match(word):
            continue
        close = close_commands(word, commands)
        if not close:
            continue
        what = f"{word!r} is a command" if close[0] == word.lower() else f"{word!r} is not a command"
        suggest = " or ".join(f"`route {name}`" for name in close[:2])
        raise NotAPrompt(
            f"{what}, so it was not sent to a model. Did you mean {suggest}? To send it as a prompt, "
            f"write `route ask {word}` or `route -- {word}`. (Global options such as -c may stand "
            "before or after the command.)")


def _ask_first(words: Sequence[str], routed: list[str]) -> None:
    if len(words) != 1 or words[0].lower() not in ELSEWHERE:
        return
    word = words[0]
    raise AskFirst(f"{word!r} is not a route command (it is one of llm's, or another tool's), so it was not sent "
                   f"to a model: `route --help` lists route's commands. To send it as a prompt, write "
                   f"`route ask {word}` or `route -- {word}`.", word, routed)


def _command_path(group: Command, args: list[str]) -> tuple[list[str], Command, list[str]]:
    """The command words at the front of `args` (descending into groups), the leaf, the rest."""
    path: list[str] = []
    node = group
    rest = args
    while hasattr(node, "commands") and rest and rest[0] in node.commands:
        path.append(rest[0])
        node = node.commands[rest[0]]
        rest = rest[1:]
    return path, node, rest


def dispatch(group: Command, args: Sequence[str], *, completing: bool = False) -> list[str]:
    """The arguments for `group` to parse: the command first, then its own and the global options.
    `completing`: shell completion, where no command yet means "offer the commands", not `ask`."""
    leading, rest = _leading_globals(args)
    if (rest and rest[0] in PASSTHROUGH) or (completing and not rest):
        return rest
    explicit = True
    if rest and rest[0] == "--":
        rest = [DEFAULT_COMMAND, *rest]
    elif not rest or rest[0] not in group.commands:
        explicit = False
        rest = [DEFAULT_COMMAND, *rest]
    path, leaf, tail = _command_path(group, rest)
    valued = _takes_value(leaf)
    found, tail = _split_globals(tail, valued)
    routed = [*path, *_keep_declared(leading + found, leaf), *tail]
    if not explicit:
        words = _positionals(tail, valued)
        _refuse_command_words(words, sorted(group.commands))
        _ask_first(words, routed)
    return routed
