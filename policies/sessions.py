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
The evidence is what the client sends next, read from its structure, never from the router's
guess nor from a list of phrases a failing tool or a user might print:

    tool-errors   failed steps in a row (ERRORS_TO_ESCALATE): a tool result whose client says it
                  failed -- its own flag first (Anthropic's `is_error`, true or false, carried by
                  the server's dialect; an error flag in a JSON result: `success: false`,
                  `is_error`, a non-empty `error`), else the exit status the client writes on a
                  status line of its own at the opening or the close of the output (`Exit code:
                  1`, `[The command completed with exit code 1.]`, `"returncode": 1`; the closing
                  one wins, and an exit status a program printed amid its output is output), else
                  an "Error: " opening; a call of a tool the request does not offer (OpenCode
                  answers a malformed call with its hidden `invalid` tool); or, alone, a tool call
                  repeated with the same arguments as the one before it *after that one failed*
                  (the model stuck; polling a running command repeats a call that succeeded). A
                  zero exit code is a success whatever the output prints ("error" in a file name,
                  a test named for errors).
    repeated      the very same turn sent again after it was answered, or the user restating an
                  earlier turn (most of its words again; never a retry after an error, which was
                  not answered)
    correction    the user's next turn opens by saying the answer was wrong ("that's wrong")
    refusal       the model refused the last turn
    empty         the last answer was empty, or cut short at its token limit (finish reason
                  `length`)

One signal moves one tier; each move is recorded with the signal that caused it, and the count
of failed steps starts again after it: the new tier is judged on its own steps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from backends.types import Message, content_text
from policies.task import Task, read_task, scored_text

__all__ = ["ERRORS_TO_ESCALATE", "SIGNALS", "Escalation", "Turn", "correction", "escalation", "is_tool_error",
           "read_turn", "restated", "tool_failed"]

ERRORS_TO_ESCALATE = 2  # failed steps in a row that say the model is not managing the task
SIGNALS = ("tool-errors", "repeated", "correction", "refusal", "empty")
# A status line: the whole line is an exit status, as clients write theirs: "Exit code: 1" (Codex,
# first), "Exit Code: 0" (Qwen Code, among its closing fields), "[The command completed with exit
# code 1.]" (OpenHands, last), "Process exited with code 1". A few words may lead it, no digits
# among them ("attempt 1 exited with code 1" is a program's output); only an end's punctuation follows.
_STATUS_LINE = re.compile(r"^\W{0,3}(?:[A-Za-z]+ ){0,4}?(?:exit(?:ed)?[ _]?(?:with )?(?:code|status)|return[ _]?code"
                          r"|exitcode)\"?\s*[:=]?\s*(-?\d+)\W{0,3}$"
                          r"|^<(return_?code|exit_?code|exit_?status)>\s*(-?\d+)\s*</(?:return_?code|exit_?code|exit_?status)>$",
                          re.IGNORECASE)  # ... or tagged, as text agents report it: <returncode>1</returncode>
_OPENING_LINES, _CLOSING_LINES = 3, 5  # where a client's status line stands: the output's first or last lines
_JSON_ITEMS = 8  # items of a JSON list result whose texts are read for a status line
# A failed step as clients open its result: is_error as the dialects write it for chat backends;
# Claude Code's own tag; Continue CLI's and OpenHands' own error reports.
_FLAGGED = ("Error:", "error:", "ERROR:", "<tool_use_error>", "Error executing tool ", "[An error occurred during execution.]")
_RESTATED = 0.6  # share of a turn's words found in one earlier user turn: the user asking again
_RESTATED_WORDS = 4  # ... in a turn of at least this many words ("ok, continue" twice is not)
_WORD = re.compile(r"\w+")
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
    repeated_call: bool = False  # the model called the same tools with the same arguments again


def tool_failed(text: str, flag: object = None) -> bool | None:
    """Whether a tool result says it failed, by its structure: True or False when it does
    (`flag`, the client's own `is_error`; a JSON result's flag; the client's status line), None
    when it does not say (plain output). Bounded work: the status is looked for in the first
    2,000 characters' opening lines and the last 500's closing lines."""
    if isinstance(flag, bool):
        return flag
    body = text.strip()
    if body.startswith(("{", "[")):
        status = _json_status(body)
        if status is not None:
            return status
    code = _status(body)
    if code is not None:
        return code != 0
    if body.startswith(_FLAGGED):
        return True
    return None


def _status(body: str) -> int | None:
    """The exit status on the output's closing status line, else on an opening one."""
    closing = [line for line in body[-500:].splitlines() if line.strip()][-_CLOSING_LINES:]
    opening = [line for line in body[:2000].splitlines() if line.strip()][:_OPENING_LINES]
    for lines in (reversed(closing), opening):
        for line in lines:
            match = _STATUS_LINE.match(line.strip())
            if match is not None:
                return int(match.group(1) if match.group(1) is not None else match.group(3))
    return None


def _json_status(body: str) -> bool | None:
    """A JSON result's own say: an error flag or an exit status (a list: any item failing); else
    the status line in the text it carries (Gemini CLI: `{"output": "...\nExit Code: 2\n..."}`)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    said = [s for s in map(_item_status, items) if s is not None]
    if said:
        return any(said)
    codes = [code for item in items[:_JSON_ITEMS] if isinstance(item, dict)
             for text in item.values() if isinstance(text, str) and (code := _status(text.strip())) is not None]
    return any(code != 0 for code in codes) if codes else None


def _item_status(item: object) -> bool | None:
    if not isinstance(item, dict):
        return None
    for key in ("returncode", "exit_code", "exitCode", "exit_status"):
        if isinstance(item.get(key), int):
            return bool(item[key])
    if item.get("is_error") is True or item.get("success") is False or item.get("ok") is False:
        return True
    if item.get("error") not in (None, "", False, [], {}):
        return True
    if item.get("success") is True or item.get("ok") is True:
        return False
    return None


def is_tool_error(text: str) -> bool:
    """A tool result that reports failure (see `tool_failed`; plain output says nothing)."""
    return tool_failed(text) is True


def restated(text: str, earlier: list[str]) -> bool:
    """The user asking again: this turn and one earlier user turn share most of their words,
    both ways (a turn typed again, or the task restated around the same words; a follow-up
    that names a word of the task is not)."""
    words = set(_WORD.findall(text.lower()))
    if len(words) < _RESTATED_WORDS:
        return False
    for before in earlier:
        seen = set(_WORD.findall(before.lower()))
        shared = len(words & seen)
        if shared >= _RESTATED * len(words) and shared >= _RESTATED * len(seen):
            return True
    return False


def correction(text: str) -> bool:
    """The user's turn opens by saying the last answer was wrong or did not work."""
    return _CORRECTION.search(text[:_CORRECTION_WINDOW]) is not None


def read_turn(messages: list[Message], task: Task | None = None, tools: object = None) -> Turn:
    """The latest call of a conversation, read: its first and latest turns as the user's own
    words, the client's harness set aside (policies/task.py; `task`: read already), and the
    failed steps it answers with (`tools`: the request's tool schemas, when known)."""
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
        errors = _failed_steps(messages, last_call, results, _offered(tools))
        return Turn(True, "", first, errors, refusal, scored=scored_text(task),
                    repeated_call=_repeated_call(messages, last_call))
    reported = _reported_output(messages, task)
    if reported is not None:  # a text agent's tool output, sent as a user turn with no words of the user's
        return Turn(True, "", first, int(tool_failed(reported) is True), refusal, scored=scored_text(task))
    return Turn(False, task.latest, first, 0, refusal, empty, scored_text(task))


def _reported_output(messages: list[Message], task: Task) -> str | None:
    """The latest user turn's text when it follows one of the model's and holds no words of the
    user's (the reader set it all aside: a tool's output a text agent reports, a reminder), else
    None. Such a turn asks nothing new: it is a continuation, never the task sent again."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), -1)
    if task.at < 0 or last <= task.at or messages[last - 1].get("role") != "assistant":
        return None
    return content_text(messages[last].get("content"))


def _offered(tools: object) -> frozenset[str] | None:
    """The names of the tools a request offers; None when that is not known: no tools sent, or
    one that is not a plain function (a provider's built-in tool, a namespace of tools, a local
    shell), whose calls may carry names the list does not."""
    if not isinstance(tools, list) or not tools:
        return None
    names = set()
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            return None
        function = tool.get("function")
        name = (function if isinstance(function, dict) else tool).get("name")
        if not isinstance(name, str):
            return None
        names.add(name)
    return frozenset(names)


def _calls(message: Message) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of each tool call of an assistant turn."""
    out = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        out.append((str(call.get("id")), str(function.get("name")), str(function.get("arguments"))))
    return out


def _failed_steps(messages: list[Message], last_call: int, results: list[Message],
                  offered: frozenset[str] | None) -> int:
    """Failed steps this call reports: each result that says it failed or answers a call of a
    tool the request does not offer."""
    calls = _calls(messages[last_call])
    unoffered = {i for i, name, _ in calls if offered is not None and name not in offered}
    return sum(_result_failed(m) or str(m.get("tool_call_id")) in unoffered for m in results)


def _result_failed(message: Message) -> bool:
    return tool_failed(content_text(message.get("content")), message.get("is_error")) is True


def _repeated_call(messages: list[Message], last_call: int) -> bool:
    """The model's latest tool calls are its previous ones again, with the same arguments, after
    those failed: the last attempt did not get it anywhere, and it is trying the same thing (an
    agent's next step differs, a re-run after an edit has the edit between). The same call after
    one that succeeded is polling (Codex's `write_stdin`, Claude Code's `BashOutput`), not this."""
    before_at = next((i for i in range(last_call - 1, -1, -1)
                      if messages[i].get("role") == "assistant" and messages[i].get("tool_calls")), None)
    if before_at is None:
        return False
    before = _calls(messages[before_at])
    if [c[1:] for c in before] != [c[1:] for c in _calls(messages[last_call])]:
        return False
    ids = {c[0] for c in before}
    return any(_result_failed(m) for m in messages[before_at + 1:last_call]
               if m.get("role") == "tool" and str(m.get("tool_call_id")) in ids)


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
    if turn.repeated_call:
        return Escalation(tier + 1, "tool-errors", "the same tool call with the same arguments again")
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
