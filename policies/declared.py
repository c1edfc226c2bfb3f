"""What a request declares of its own format: the lines its system prompt says a user turn will
hold. Pure: texts in, labels and fields out; used by policies/harness.py.

A client that fills in a template often shows it to the model first, in its system prompt:
dspy's ChatAdapter writes each field's marker line with a placeholder under it (`[[ ## question
## ]]`, then `{question}`); a text agent's ReAct format names the labels its turns open with
("Observation: the result of the action"). What the system prompt declares is the client's by
the request's own word, not by a guess at what users type, so:
- a declared label opening a user turn that follows the model's answer is the client's report
  of a tool's output (policies/wrappers.py `follow_up`);
- declared field markers split a user turn into fields: the user's words are the field whose
  name names a query (`question`, `query`, `task`, ...), else the first one; a paragraph that
  names the markers ("Respond with the corresponding output fields, starting with the field
  `[[ ## answer ## ]]`") is the client's.

Cost: nothing until a rule asks; then the system prompts are joined once and searched for a
line-start placeholder (`\n{`) before any regular expression runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["QUERY_NAME", "Declared", "field_words"]

QUERY_NAME = re.compile(r"user|query|request|task|question|prompt|ask", re.IGNORECASE)  # a name for what a person asks
# A placeholder on a line of its own under a marker line, or after a label on the same line ("Question: {input}").
_PLACEHOLDER = re.compile(r"^[ \t]*(?:(?P<label>[^\n{}]{1,60}?:)[ \t]*)?\{(?P<name>[A-Za-z_]\w{0,63})\}[ \t]*$",
                          re.MULTILINE)
_MARKER_MIN = 3  # characters of a marker line: shorter is any user's line


class Declared:
    """What the system prompts of one request declare, read when first asked (`systems`: their
    texts, produced on demand)."""

    __slots__ = ("_fields", "_systems", "_texts")

    def __init__(self, systems: Callable[[], list[str]]):
        self._systems = systems
        self._texts: list[str] | None = None
        self._fields: dict[str, str] | None = None

    def _joined(self) -> list[str]:
        if self._texts is None:
            self._texts = self._systems()
        return self._texts

    def label(self, label: str) -> bool:
        """Whether a system prompt opens a line with `label` ("Observation:"): its format says
        a turn opens so."""
        return any(text.startswith(label) or f"\n{label}" in text for text in self._joined())

    @property
    def fields(self) -> dict[str, str]:
        """Marker line -> field name, of every field a system prompt shows with a placeholder."""
        if self._fields is None:
            self._fields = {}
            for text in self._joined():
                if "{" in text:
                    self._fields.update(_fields_of(text))
        return self._fields


def _fields_of(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _PLACEHOLDER.finditer(text):
        label, name = match.group("label"), match.group("name")
        if label is not None:
            marker = label.strip()
        else:  # the marker is the line above the placeholder's
            above = text.rfind("\n", 0, max(0, match.start() - 1))
            marker = text[above + 1:match.start()].strip()
        if len(marker) >= _MARKER_MIN and "{" not in marker:
            found[marker] = name
    return found


def _marker_of(line: str, fields: dict[str, str]) -> str | None:
    """The declared marker `line` is or opens with (a label's value may follow it on its line)."""
    stripped = line.strip()
    if stripped in fields:
        return stripped
    head = stripped.split(":", 1)[0] + ":" if ":" in stripped else None
    return head if head in fields else None


def field_words(text: str, fields: dict[str, str]) -> tuple[str, int] | None:
    """(the user's words, the characters that are the client's) of a turn written in the declared
    fields; None when no line of it is a declared marker."""
    lines = text.split("\n")
    sections: list[tuple[str, int, str]] = []  # (field name, line index, what follows the marker on its line)
    for i, line in enumerate(lines):
        marker = _marker_of(line, fields)
        if marker is not None:
            sections.append((fields[marker], i, line.strip()[len(marker):].strip()))
    if not sections:
        return None
    pick = next((n for n, s in enumerate(sections) if QUERY_NAME.search(s[0])), 0)
    _, at, inline = sections[pick]
    end = sections[pick + 1][1] if pick + 1 < len(sections) else len(lines)
    body = "\n".join([inline, *lines[at + 1:end]] if inline else lines[at + 1:end])
    markers = tuple(fields)
    kept = [p for p in re.split(r"\n[ \t]*\n", body) if p.strip() and not any(m in p for m in markers)]
    words = "\n\n".join(kept).strip("\r\n").rstrip()  # a user's own leading blanks are theirs
    return (words, len(text) - len(words)) if words else None
