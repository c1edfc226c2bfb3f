"""What known clients write into a user turn, as data: the names and kinds the task reader
(policies/harness.py, policies/task.py) gives what its general rules find, and the few shapes
no general rule can tell from the user's words. Pure data and a merge; no reading here.

The reader does not need this table to find a client's harness: its rules name no client
(tagged blocks of any name, context before the user's words, a template around them, quoted
tasks, tool output; policies/wrappers.py), and what a client repeats is learned from its own
traffic (policies/template.py). What the table adds:
- a block's kind by its tag (`reminder`, `environment`, ...) for `--explain`, where the general
  rule can only say `context`;
- tags that wrap what the user typed, and openings that relay it, so that a block of the
  user's words is kept (Claude Code's <command-args>; its reminder of a message the user sent
  while it worked);
- whole turns a client writes in the user's name, its example conversation, and its system
  prompt folded into the first user turn (aider), which read as a user's turns to any rule;
- the template a client fills in with the user's words (mini-swe-agent's label line and page of
  rules): no rule reads a label line or a page of rules in a turn, since users write both.
Each entry comes from the recorded corpus (tests/data/clients) or the client's own sources.
`benchmarks/harness.py --leave-one-client-out` reads every client with its own entry removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

__all__ = ["KNOWN", "TYPED", "ClientShapes", "Shapes"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ClientShapes:
    """One client's entry. `blocks`: tag -> kind; `kept`: tags that wrap the user's words;
    `queries`: tags whose block holds the user's words when a turn (or a block) is blocks alone;
    `relayed`: a block opening so is the user's words; `turns`: the opening words of whole user
    turns the client writes -> kind; `exact`: such turns word for word; `folded`: how its system
    prompt opens when sent as the first user turn; `examples_closing`: the opening of the user
    turn that closes its example conversation; `templates`: (opening, before, after) of each
    template it fills in: a turn that opens with `opening` holds the user's words after the
    first `before` that follows it (right after `opening` when empty), up to the next `after`
    (to its end when empty)."""

    blocks: Mapping[str, str] = field(default_factory=dict)
    kept: frozenset[str] = frozenset()
    queries: frozenset[str] = frozenset()
    relayed: tuple[str, ...] = ()
    turns: Mapping[str, str] = field(default_factory=dict)
    exact: Mapping[str, str] = field(default_factory=dict)
    folded: tuple[str, ...] = ()
    examples_closing: str | None = None
    templates: tuple[tuple[str, str, str], ...] = ()


def _merged(tables: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """One table of several; where two name the same key, the later one's value stands."""
    merged: dict[str, str] = {}
    for table in tables:
        merged.update(table)
    return merged


def _joined(groups: Iterable[Iterable[_T]]) -> tuple[_T, ...]:
    return tuple(chain.from_iterable(groups))


class Shapes:
    """Several clients' entries merged, as the reader looks them up. `typed`: the conversation is
    a person's own, every word typed (route's own CLI says so of its turns, a system prompt
    included): nothing in it is read as a client's."""

    __slots__ = ("blocks", "clients", "examples_closing", "exact", "folded", "kept", "openings", "queries", "relayed",
                 "templates", "turn_starts", "turns", "typed")

    def __init__(self, clients: Mapping[str, ClientShapes], typed: bool = False):
        self.typed = typed
        self.clients = dict(clients)
        entries = list(self.clients.values())
        self.blocks: dict[str, str] = _merged(c.blocks for c in entries)
        self.kept: frozenset[str] = frozenset(_joined(c.kept for c in entries))
        self.queries: frozenset[str] = frozenset(_joined(c.queries for c in entries))
        self.relayed: tuple[str, ...] = _joined(c.relayed for c in entries)
        self.turns: dict[str, str] = _merged(c.turns for c in entries)
        self.turn_starts: tuple[str, ...] = tuple(self.turns)
        self.exact: dict[str, str] = _merged(c.exact for c in entries)
        self.folded: tuple[str, ...] = _joined(c.folded for c in entries)
        self.examples_closing: tuple[str, ...] = tuple(c.examples_closing for c in entries if c.examples_closing)
        self.templates: tuple[tuple[str, str, str], ...] = _joined(c.templates for c in entries)
        self.openings: tuple[str, ...] = tuple(opening for opening, _, _ in self.templates)  # one C-level startswith

    def without(self, names: Iterable[str]) -> Shapes:
        """These shapes less the entries of `names` (what a client's first request is read with
        when the rules are judged on it: benchmarks/harness.py)."""
        drop = set(names)
        return Shapes({n: c for n, c in self.clients.items() if n not in drop})


# Codex 0.171: codex-rs core/src/context (its "contextual user fragments"), and the developer
# messages of the corpus. Its AGENTS.md block opens with a heading line naming the folder.
_CODEX = ClientShapes(blocks={
    "environment_context": "environment", "user_instructions": "instructions", "INSTRUCTIONS": "instructions",
    "skills_instructions": "instructions", "skill": "instructions", "permissions instructions": "instructions",
    "apps_instructions": "instructions", "plugins_instructions": "instructions",
    "collaboration_mode": "instructions", "user_shell_command": "command_output", "turn_aborted": "client_note",
    "subagent_notification": "client_note", "hook_prompt": "client_note"})

# Claude Code 2.1.197: the tags its binary writes into user turns. Tags that wrap what the
# user typed (<command-args>, <bash-input>, <user-memory-input>) are kept, as is a reminder
# that relays a message the user sent while it worked.
_CLAUDE_CODE = ClientShapes(
    blocks={"system-reminder": "reminder", "new-diagnostics": "reminder", "task-notification": "client_note",
            "local-command-caveat": "client_note", "local-command-stdout": "command_output",
            "local-command-stderr": "command_output", "bash-stdout": "command_output",
            "bash-stderr": "command_output"},
    kept=frozenset({"command-args", "command-message", "command-name", "bash-input", "user-memory-input"}),
    relayed=("The user sent a new message while you were working:",
             "A message arrived in the bound thread while you were working:",
             "Messages arrived in the bound thread while you were working:"))

# aider 0.86 (aider/coders/*_prompts.py, base_coder.py): whole user turns it writes in the
# user's name, each followed by a scripted reply; its example conversation's closing turn; its
# system prompt folded into the first user turn for a model without a system role (after at
# most one line of the model's own prefix, "Formatting re-enabled.").
_AIDER = ClientShapes(
    turns={"I have *added these files to the chat* so you": "files",
           "These files have been *added these files to the chat*": "files",
           "Here are summaries of some files present in my git repository.": "files",
           "I am working with you on code in a git repository.\nHere are summaries": "files",
           "Here are some READ ONLY files, provided for your reference.": "files",
           "I am not sharing any files that you can edit yet.": "files",
           "I am not sharing the full contents of any files with you yet.": "files",
           "Don't try and edit any existing code without asking me to add the files to the chat!": "files",
           "I committed the changes with git hash ": "client_note",
           "I switched to a new code base. Please don't consider the above files": "examples"},
    exact={"I updated the files.": "client_note", "I edited the files myself.": "client_note",
           "I didn't see any properly formatted edits in your reply?!": "client_note"},
    folded=("Act as an expert software developer.\nAlways use best practices when coding.",
            "Act as an expert code analyst.\nAnswer questions about the supplied code.",
            "Act as an expert architect engineer and provide direction to your editor engineer."),
    examples_closing="I switched to a new code base. Please don't consider the above files")

# mini-swe-agent 2.4 (its default config's `instance_template`): the task after a label line,
# then kilobytes of rules addressed to the model, opening with these words.
_MINI_SWE_AGENT = ClientShapes(templates=(
    ("Please solve this issue: ", "",
     "\n\nYou can execute bash commands and edit files to implement the necessary changes."),))

# LangChain's stock ReAct prompt (the hub's hwchase17/react, quoted in `create_react_agent`'s
# docstring, langchain 0.3): one user turn of tools and format, the question, then the scratchpad
# of the agent's steps the loop appends after "Thought:".
_LANGCHAIN = ClientShapes(templates=(
    ("Answer the following questions as best you can. You have access to the following tools:",
     "\n\nBegin!\n\nQuestion: ", "\nThought:"),))

# CrewAI 1.15 (its i18n `task` slice): the task's description after "Current Task: ", then the
# expected output and the instruction to return it whole.
_CREWAI = ClientShapes(templates=(
    ("\nCurrent Task: ", "", "\n\nThis is the expected criteria for your final answer: "),
    ("Current Task: ", "", "\n\nThis is the expected criteria for your final answer: ")))

# smolagents 1.26 (its memory's task step): "New task:" above the task, in the first user turn of
# a run and after the last observation of a run that goes on (a second `run(reset=False)`).
_SMOLAGENTS = ClientShapes(templates=(("New task:\n", "", ""),))

# Marvin 3.2 (its task prompt): the task's instructions inside its <task>, beside the task's id,
# its result type and the actor it is assigned to.
_MARVIN = ClientShapes(blocks={"id": "client_note", "result-type": "format_rules", "assigned-actor-id": "client_note"},
                       queries=frozenset({"instructions"}))

# The clients' names as their recordings give them (`client` in tests/data/clients/*.json).
KNOWN = Shapes({"codex": _CODEX, "claude-code": _CLAUDE_CODE, "aider": _AIDER, "mini-swe-agent": _MINI_SWE_AGENT,
                "langchain": _LANGCHAIN, "crewai": _CREWAI, "smolagents": _SMOLAGENTS,
                "marvin": _MARVIN})
# What route's own CLI sends (`route "..."`, `route chat`): the person at the terminal typed it all.
TYPED = Shapes({}, typed=True)
