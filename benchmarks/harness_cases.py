"""The four kinds of wrapper issue 46 found in agent clients nobody here recorded, written as
synthetic cases around held-out prompts: benchmarks/harness.py scores each beside the bare
prompt, with no known client's shapes at all (policies/shapes.py left empty).

    template   a label line before the task and a page of rules after it; or the task, then
               a page of rules under a heading
    quoted     the task in quotes, then an environment part (time, working directory)
    context    an environment report sent before the task: its own user turn with a scripted
               reply, or a part of the task's turn; an IDE agent's attached file and tagged query
    follow-up  a text agent's tool output in a user turn, the follow-up merged after it

The file a case attaches or pastes is another held-out prompt of the routing data (the one
after the task, in the sample's order), not text written to suit the reader; the wrappers' own
words (rules, an environment report, a test run's output) are a generic agent's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backends.types import Message

__all__ = ["KINDS", "Case", "cases", "short_template"]

_RULES = """You can run shell commands and edit files to finish the task.

## How to work

1. Read the relevant files before you change anything.
2. Reproduce the problem with a small script first.
3. Make the smallest change that solves it, then run the tests again.
4. When you are done, say so in one line and stop.

## Rules

- Every reply must contain exactly one command in a fenced block.
- Commands run in a fresh shell: `cd` and exported variables do not persist.
- Never run interactive programs (editors, pagers, prompts); pass flags that avoid them.
- Do not install packages unless the task asks for it.
- Keep output short: pipe long output through `head` or `tail`.
- If a command fails, read the error before trying something else.

## Format

Write your reasoning first, in a few sentences, then the command:

```bash
your_command_here
```

Failure to follow these rules will make the run fail. You have a limited number of steps; use them
well and do not repeat a command that already failed without changing it.
"""
_ENVIRONMENT = ("Current time: 2026-12-05T10:21:50Z\nWorking directory: /home/user/project\n"
                "Platform: linux\nShell: bash")
_TREE = ("Today's date: Saturday, December 5, 2026\nOperating system: linux\nWorking directory: /home/user/project\n"
         "Folder structure:\n/home/user/project/\n\u251c\u2500\u2500 README.md\n\u251c\u2500\u2500 src/\n"
         "\u2502   \u2514\u2500\u2500 main.py\n\u2514\u2500\u2500 tests/\n    \u2514\u2500\u2500 test_main.py")
_OUTPUT = ("============================= test session starts ==============================\n"
           "collected 12 items\n\ntests/test_main.py ........F...                                 [100%]\n\n"
           "FAILED tests/test_main.py::test_parse - AssertionError: assert 3 == 4\n"
           "========================= 1 failed, 11 passed in 0.42s =========================")
_SYSTEM: Message = {"role": "system", "content": "You are a helpful agent that works in a terminal."}


@dataclass(frozen=True, slots=True)
class Case:
    """One synthetic wrapper: its kind, its name, and the conversation it makes of a task and
    another held-out prompt (`other`, the context it carries)."""

    kind: str
    name: str
    build: Callable[[str, str], list[Message]]
    learnable: bool = True  # what it wraps the task in repeats across a client's tasks (so its traffic shows it)


def _label_rules(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": f"Please complete this task: {task}\n\n{_RULES}"}]


def _heading_rules(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": f"{task}\n\n# Instructions\n\n{_RULES}{_RULES}"}]


def _quoted(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": f'"{task}"\n\n{_ENVIRONMENT}'}]


def _context_turn(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": _TREE}, {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": task}]


def _context_part(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": [{"type": "text", "text": _TREE}, {"type": "text", "text": task}]}]


def _ide_query(task: str, other: str) -> list[Message]:
    attached = f"<attached_files>\n<file path=\"notes/problem.md\">\n{other}\n</file>\n</attached_files>"
    return [_SYSTEM, {"role": "user", "content": f"{attached}\n<user_query>\n{task}\n</user_query>"}]


def _pasted_file(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": f"notes/problem.md\n```\n{other}\n```\n\n{task}"}]


def _follow_up(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": "Fix the failing test."},
            {"role": "assistant", "content": "Thought: I should run the tests first.\nAction: bash\n"
                                             "Action Input: pytest -q"},
            {"role": "user", "content": f"Observation: {_OUTPUT}\n\n{task}"}]


def _follow_up_tagged(task: str, other: str) -> list[Message]:
    return [_SYSTEM, {"role": "user", "content": "Fix the failing test."},
            {"role": "assistant", "content": "I will run the tests.\n```bash\npytest -q\n```"},
            {"role": "user", "content": f"<returncode>1</returncode>\n<output>\n{_OUTPUT}\n</output>\n\n{task}"}]


def short_template(task: str) -> list[Message]:
    """A client's own short template, beyond the four kinds: a heading line before the task and a
    line of format rules after it, far from a page of rules. No general rule reads it; the
    client's template learned from its traffic does (policies/template.py)."""
    return [_SYSTEM, {"role": "user", "content": f"### Ticket\n{task}\n### Reply with JSON: answer, confidence."}]


KINDS = ("template", "quoted", "context", "follow-up")
_CASES = (Case("template", "label line, rules after", _label_rules),
          Case("template", "task, then a heading and rules", _heading_rules),
          Case("quoted", "quoted task, environment after", _quoted),
          Case("context", "environment turn and a scripted reply", _context_turn),
          Case("context", "environment part, then the task's part", _context_part),
          Case("context", "attached file and a tagged query", _ide_query),
          Case("context", "a pasted file, then the task", _pasted_file, learnable=False),
          Case("follow-up", "Observation: output, then the follow-up", _follow_up, learnable=False),
          Case("follow-up", "tagged output, then the follow-up", _follow_up_tagged))


def cases() -> tuple[Case, ...]:
    return _CASES
