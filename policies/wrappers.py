"""General shapes of a client's wrapping around the user's words, for a client nobody recorded.
Pure: text in, (where the user's words are, what was set aside) out; used by policies/harness.py.

Each rule names no client. Each reads a shape clients write and users do not: what is set aside
has the form of an environment report, a file, a tool's output or a page of rules, and the
words kept are the ones only the user could have written. Kept as they are: a user's own text
in any of these forms when nothing of a client's surrounds it (a turn that is all rules is
scored whole, see policies/task.py).

- pasted files: a line naming a file, then a fenced block (what agents attach as context);
- a template around the task: an optional label line ("Please solve this issue: ") and, after
  the task, a page of rules addressed to the model (kilobytes, headings and lists);
- a quoted task followed by an environment part (time, working directory, platform);
- an environment report: lines of `key: value`, paths, dates and folder trees, as a context
  part or turn before the user's words;
- a tool's output with the user's follow-up merged after it (text agents report a command's
  output in a user turn: "Observation: ..." then the follow-up).

Cost: each rule is one or two regular expressions over the turn, or one pass over its lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["context_like", "follow_up", "prose", "quoted_task", "rules_after", "without_files"]

_KEY_VALUE = re.compile(r"^\s*(?:[-*]\s+)?(?:\*\*)?[A-Za-z][\w .'()/-]{0,48}(?:\*\*)?:(?:\*\*)?(?:\s+\S|\s*$)")
_PATH = re.compile(r"(?:^|[\s(`'\"])(?:/|~/|[A-Za-z]:\\)[\w.@~-]+[/\\]")
_TREE = re.compile(r"[\u2500-\u257f]")  # box drawing: a folder tree
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? \d{4}\b")
_FILE_LINE = re.compile(r"^[ \t]*[`*]*(?:[\w.@~-]+/)*[\w@~-]+\.\w{1,8}[`*]*:?[ \t]*\n[ \t]*(```|~~~)[^\n]*\n", re.MULTILINE)
_LABEL = re.compile(r"[A-Z][^\n:.?!]{0,60}:[ \t]")  # one blank: the user's own leading blanks are theirs
_LIST_LINE = re.compile(r"^[ \t]*(?:#{1,6} |[-*+] |\d{1,2}[.)] |\*\*[^*\n]+\*\*)", re.MULTILINE)
_DIRECTIVE = re.compile(r"(?:#|<[A-Za-z]|\*\*|You |Your |Always |Never |Do not |Don't |Make sure |Remember |Note:|"
                        r"IMPORTANT|Important|Rules|Instructions|Guidelines)")
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_CODE_TOKEN = re.compile(r"\w/\w|::|==|\w\.\w+\(|\[\d+%\]|^[A-Z]{4,}:?$|^[-=*#~]{4,}$")  # paths, test ids, banners
_OUTPUT_LABEL = re.compile(r"[A-Za-z][\w ]{0,30}:[ \t]*")
_PARAGRAPH = re.compile(r"\n[ \t]*\n(?=[ \t]*\S)")
RULES_MIN = 600  # characters of rules after a labelled task; unlabelled, RULES_ALONE_MIN
RULES_ALONE_MIN = 2000  # "kilobytes of rules": a user's long question rarely ends in a page of them
_RULES_RATIO = 3  # unlabelled, the rules outweigh the task at least this many times (labelled: any length)
_LIST_LINES = 3  # headings and list items a page of rules holds at least
_QUOTE_CLOSE = {"\"": "\"", "'": "'", "\u201c": "\u201d"}  # an opening quote: its closing one
_OUTPUT_LINES = 2  # a tool's output a follow-up is merged after: lines, most of them not a person's


def without_files(text: str) -> tuple[str, int]:
    """`text` less the files pasted into it (a line naming the file, then a fenced block), and
    the characters set aside; the user's own code, with no file named above it, is kept."""
    if "```" not in text and "~~~" not in text:
        return text, 0
    kept, last, aside = [], 0, 0
    for match in _FILE_LINE.finditer(text):
        if match.start() < last:
            continue
        fence = match.group(1)
        close = text.find("\n" + fence, match.end() - 1)
        if close < 0:
            continue
        end = text.find("\n", close + 1 + len(fence))
        end = len(text) if end < 0 else end + 1
        kept.append(text[last:match.start()])
        aside += end - match.start()
        last = end
    if not aside:
        return text, 0
    kept.append(text[last:])
    return "\n".join(k.strip("\n") for k in kept if k.strip()), aside


def _label_end(text: str) -> int:
    """Where the task starts after a label on its first line ("Please solve this issue: "), or 0."""
    label = _LABEL.match(text)
    line_end = text.find("\n")
    return label.end() if label is not None and (line_end < 0 or label.end() <= line_end) else 0


def _paragraph_breaks(text: str, start: int) -> Iterator[int]:
    at = text.find("\n\n", start)
    while at >= 0:
        yield at
        at = text.find("\n\n", at + 2)


def _page_of_rules(rest: str) -> bool:
    return bool(_DIRECTIVE.match(rest)) and len(_LIST_LINE.findall(rest)) >= _LIST_LINES


def rules_after(text: str) -> tuple[int, int] | None:
    """(where the task starts, where it ends) when `text` is a template around it: rules after
    the task that outweigh it, open a paragraph as rules do and hold headings or lists; an
    optional label line before it ("Please solve this issue: "). None when it is not one."""
    if len(text) < RULES_MIN:
        return None
    start = _label_end(text)
    # A label already says "template", so less weight of rules is asked of a labelled task.
    least, ratio = (RULES_MIN, 0) if start else (RULES_ALONE_MIN, _RULES_RATIO)
    for at in _paragraph_breaks(text, start):
        task, rest = text[start:at].strip(), text[at:].lstrip()
        if len(rest) < max(least, ratio * len(task)):
            return None  # a later break leaves less after it and more before: none can qualify
        if task and _page_of_rules(rest):
            return start, at
    return None


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


def _mostly_output(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) >= _OUTPUT_LINES and 2 * sum(map(prose, lines)) < len(lines)


def follow_up(text: str) -> int | None:
    """Where the user's follow-up starts in a turn that reports a tool's output first: the
    turn opens with a label ("Observation:", "Output:") or a tag, then lines of output (two or
    more, most of them not a person's), then the first paragraph a person wrote and all after
    it. None when it is not such a turn (a person's text under a label); len(text) when it is
    output alone (a tool's result, no words of the user's)."""
    head = text.lstrip()
    label = _OUTPUT_LABEL.match(head)
    if label is None and not head.startswith("<"):
        return None
    at = _first_prose_paragraph(text)
    output = text[:at].lstrip()
    if not _mostly_output(output[label.end() if label is not None else 0:]):
        return None  # a person's text under a label ("Question: ...", "Solve for t: ...")
    return at
