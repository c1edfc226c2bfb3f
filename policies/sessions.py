"""Route the task, not the turn: what one call of a session says about the task, and the tier the
session moves to. Pure: messages and the session's state in, a verdict out.

A session's calls are of two kinds. A *continuation* answers the model's own tool calls (the
messages after the last assistant turn that called tools are tool results, and perhaps a short
note the agent adds): it asks nothing new of the model, so it is not scored. A *new turn* is
a user turn of its own: it is scored alone -- its text, not the transcript around it, so that a
long history cannot carry an easy task across a boundary -- and the session's tier becomes the
higher of the two. So a tier only moves up: a short follow-up ("ok, continue") never moves a
hard task down.

Evidence that the tier is failing the task moves a session up one tier, and it stays there.
The evidence is what the client sends next, never the router's guess:

    tool-errors   tool results failing again and again (ERRORS_TO_ESCALATE in a row): an error
                  prefix, Claude Code's <tool_use_error>, a shell's non-zero exit code, a
                  traceback, a command not found, failing tests
    repeated      the very same turn sent again after it was answered (a user asking for another
                  answer; never a retry after an error, which was not answered)
    correction    the user's next turn says the answer was wrong ("that's wrong", "still failing")
    refusal       the model refused the last turn
    empty         the last answer was empty, or cut short at its token limit

One signal moves one tier; each move is recorded with the signal that caused it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backends.types import Message, content_text
from policies.task import Task, read_task, scored_text

__all__ = ["ERRORS_TO_ESCALATE", "SIGNALS", "Escalation", "Turn", "correction", "escalation", "is_tool_error",
           "read_turn"]

ERRORS_TO_ESCALATE = 2  # failed tool results in a row that say the model is not managing the task
SIGNALS = ("tool-errors", "repeated", "correction", "refusal", "empty")
_ERROR_PREFIXES = ("error", "traceback", "exception", "fatal", "failed", "<tool_use_error>")
# A shell tool's exit status, as Codex (text and JSON) and most agents report it.
_EXIT_CODE = re.compile(r"(?:exited with code|exit code:?|\"exit_code\":)\s*(-?\d+)", re.IGNORECASE)
# What a failing command prints on a line of its own, whatever tool wraps it: a shell that
# found no such command or file, a Python traceback, a test run with failures.
_FAILURE_LINE = re.compile(
    r"^(?:\S+:[^\n]*: (?:command not found|No such file or directory|Permission denied)$"
    r"|Traceback \(most recent call last\)|(?:error|fatal)(?:\[\w+\])?:|FAILED |=+ \d+ failed)",
    re.IGNORECASE | re.MULTILINE)
# What users write when an answer did not do the job. Read only at the start of a later turn,
# where a correction stands; the same words inside a task description are not one.
_CORRECTION = re.compile(
    r"^\W*(?:no\b|nope\b|wrong\b|incorrect\b|that'?s (?:not|wrong|incorrect)|that is (?:not|wrong|incorrect)"
    r"|this is (?:wrong|incorrect|not)|not (?:right|correct|what i)|it (?:still )?(?:doesn'?t|does not|didn'?t"
    r"|did not) work|(?:it'?s |it is )?still (?:failing|fails|broken|wrong|not|doesn'?t|crashing|erroring)"
    r"|(?:the )?tests? (?:still )?fail|same (?:error|problem|issue)|try again|you (?:broke|missed|forgot)"
    r"|that (?:broke|didn'?t|did not))",
    re.IGNORECASE)
_CORRECTION_WINDOW = 120  # characters: a correction opens the turn


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Turn:
    """What the latest call asks. `text`: the new user turn's own text ("" for a continuation);
    `first`: the conversation's first user turn (what a derived session is keyed by);
    `tool_errors`: the failed tool results this call answers with; `refusal`: the model's
    previous answer was a refusal; `empty`: it was empty or cut at its limit."""

    continuation: bool
    text: str
    first: str
    tool_errors: int = 0
    refusal: bool = False
    empty: bool = False
    scored: str = ""  # what places the call: policies/task.py's scored_text, the same as a plain call's


def is_tool_error(text: str) -> bool:
    """A tool result that reports failure: an error prefix, a non-zero exit status, or a line a
    failing command prints (looked for in its first 2,000 characters: bounded work)."""
    head = text.lstrip()[:2000]
    if head[:40].lower().startswith(_ERROR_PREFIXES):
        return True
    code = _EXIT_CODE.search(head)
    if code is not None:
        return code.group(1) != "0"
    return _FAILURE_LINE.search(head) is not None


def correction(text: str) -> bool:
    """The user's turn opens by saying the last answer was wrong or did not work."""
    return _CORRECTION.search(text[:_CORRECTION_WINDOW]) is not None


def read_turn(messages: list[Message], task: Task | None = None) -> Turn:
    """The latest call of a conversation, read: its first and latest turns as the user's own
    words, the client's harness set aside (policies/task.py; `task`: read already)."""
    task = task or read_task(messages)
    first = task.first
    last_call = max((i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("tool_calls")),
                    default=-1)
    after = messages[last_call + 1:] if last_call >= 0 else []
    results = [m for m in after if m.get("role") == "tool"]
    previous = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    refusal = previous is not None and bool(previous.get("refusal"))
    empty = previous is not None and not previous.get("tool_calls") and not content_text(previous.get("content"))
    if results and all(m.get("role") in ("tool", "user", "system") for m in after):
        errors = sum(is_tool_error(content_text(m.get("content"))) for m in results)
        return Turn(True, "", first, errors, refusal, scored=scored_text(task))
    return Turn(False, task.latest, first, 0, refusal, empty, scored_text(task))


@dataclass(frozen=True, slots=True)
class Escalation:
    """One step up, the signal that caused it (one of SIGNALS), and why in words."""

    tier: int
    signal: str
    why: str


def escalation(tier: int, top: int, turn: Turn, *, errors_in_a_row: int, repeated: bool,
               answered: bool) -> Escalation | None:
    """One tier up from `tier` (at most `top`) when a failure signal says so, else None.
    `errors_in_a_row`: failed tool results counted so far, this call's included; `repeated`:
    the client sent the same turn again after it was answered; `answered`: the session has had
    an answer before this call (a correction or an empty answer needs one)."""
    if tier >= top:
        return None
    if errors_in_a_row >= ERRORS_TO_ESCALATE:
        return Escalation(tier + 1, "tool-errors", f"{errors_in_a_row} failed tool results in a row")
    if turn.refusal:
        return Escalation(tier + 1, "refusal", "the model refused the last turn")
    if not answered:
        return None
    if turn.empty:
        return Escalation(tier + 1, "empty", "the last answer was empty or cut short")
    if repeated:
        return Escalation(tier + 1, "repeated", "the same turn was sent again after it was answered")
    if not turn.continuation and correction(turn.text):
        return Escalation(tier + 1, "correction", "the user said the last answer was wrong")
    return None
