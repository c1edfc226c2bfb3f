"""General shapes of a client's wrapping around the user's words, for a client nobody recorded.
Pure: text in, (where the user's words are, what was set aside) out; used by policies/harness.py.

Each rule names no client, and none reads a user's turn alone: each runs only where the request
itself shows a client (a system prompt, tool schemas: policies/harness.py's `Evidence`), and the
follow-up rule only where the request declares the label it reads (the system prompt's own format
lines). A user pastes specs, issues, logs and files with headings, lists, label lines and fenced
blocks; a first request holding them is scored as typed. What a client repeats around the user's
words is learned from its own traffic instead (policies/template.py).

- a quoted task followed by an environment part (time, working directory, platform);
- an environment report: lines of `key: value`, paths, dates and folder trees, as a context
  part or turn before the user's words;
- a tool's output with the user's follow-up merged after it (text agents report a command's
  output in a user turn: "Observation: ..." then the follow-up), read only under a label the
  request declares.

Cost: each rule is one or two regular expressions over the turn, or one pass over its lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["context_like", "follow_up", "prose", "quoted_task"]

_KEY_VALUE = re.compile(r"^\s*(?:[-*]\s+)?(?:\*\*)?[A-Za-z][\w .'()/-]{0,48}(?:\*\*)?:(?:\*\*)?(?:\s+\S|\s*$)")
_PATH = re.compile(r"(?:^|[\s(`'\"])(?:/|~/|[A-Za-z]:\\)[\w.@~-]+[/\\]")
_TREE = re.compile(r"[\u2500-\u257f]")  # box drawing: a folder tree
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? \d{4}\b")
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_CODE_TOKEN = re.compile(r"\w/\w|::|==|\w\.\w+\(|\[\d+%\]|^[A-Z]{4,}:?$|^[-=*#~]{4,}$")  # paths, test ids, banners
_OUTPUT_LABEL = re.compile(r"[A-Za-z][\w ]{0,30}:[ \t]*")
_PARAGRAPH = re.compile(r"\n[ \t]*\n(?=[ \t]*\S)")
_QUOTE_CLOSE = {"\"": "\"", "'": "'", "\u201c": "\u201d"}  # an opening quote: its closing one


def _env_line(line: str) -> bool:
    return bool(_KEY_VALUE.match(line) or _PATH.search(line) or _TREE.search(line) or _DATE.search(line))


def context_like(text: str) -> bool:
    """An environment report: at least three lines, most of them `key: value`, paths, dates or
    a folder tree (what a client sends as context before the user's words)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) >= 3 and 2 * sum(map(_env_line, lines)) >= len(lines)


def _environment_part(text: str) -> bool:
    return context_like(text) or (bool(text.strip()) and all(_env_line(line) for line in text.splitlines()
                                                              if line.strip()))


def _close_before_environment(quoted: str, close: str) -> int | None:
    """Where in `quoted` the quote closes at a line's end with only an environment part after."""
    end = quoted.find(close + "\n")
    while end > 0:
        if _environment_part(quoted[end + 1:]):
            return end
        end = quoted.find(close + "\n", end + 1)
    return None


def quoted_task(text: str) -> tuple[int, int] | None:
    """(start, end) of a task written in quotes, alone or followed by an environment part
    (time, working directory): what a client adds after the user's quoted words."""
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in _QUOTE_CLOSE:
        return None
    close = _QUOTE_CLOSE[stripped[0]]
    offset = text.index(stripped[0])
    if stripped.endswith(close) and close not in stripped[1:-1]:
        return offset + 1, offset + len(stripped) - 1
    end = _close_before_environment(stripped, close)
    return None if end is None else (offset + 1, offset + end)


def prose(line: str) -> bool:
    """A line a person wrote: words, not a tool's output (code, paths, test ids, rules of
    `=`, numbers): at least three words, mostly letters, few tokens of code."""
    words = _PROSE_WORD.findall(line)
    letters = sum(map(len, words))
    tokens = line.split()
    code = sum(bool(_CODE_TOKEN.search(t)) for t in tokens)
    return len(words) >= 3 and letters >= 0.5 * len(line.strip()) and 5 * code <= len(tokens)


def _first_prose_paragraph(text: str) -> int:
    """Where the first paragraph after the opening one that starts with a person's line
    begins; len(text) when none does."""
    starts = (m.end() for m in _PARAGRAPH.finditer(text))
    return next((at for at in starts if prose(text[at:].lstrip().split("\n", 1)[0])), len(text))


def follow_up(text: str, declared: Callable[[str], bool]) -> int | None:
    """Where the user's follow-up starts in a turn that reports a tool's output first: the turn
    opens with a label the request declares (`declared`: the system prompt's format names it,
    "Observation: the result of the action"), so what follows the label is the tool's output, up
    to the first later paragraph a person wrote. None when the label is not declared (a person's
    text under a label of their own: "Here is my attempt:", "Solve for t:"); len(text) when the
    turn is output alone (a tool's result, no words of the user's)."""
    label = _OUTPUT_LABEL.match(text.lstrip())
    if label is None or not declared(label.group().rstrip()):
        return None
    return _first_prose_paragraph(text)
