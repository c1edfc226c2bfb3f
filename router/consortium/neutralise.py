"""Defuse text that is put before the arbiter as material (candidates, the question).

A candidate must not be able to write anything the arbiter could take for our own markup: the
nonce tags (`<ranking-NONCE>`, `</candidate-NONCE>`, ...), the verdict labels a careless
reader might obey (`Ranking: 3, 1, 2`, `Confidence: 1.0`), or the notes we append to a
candidate (`[code metrics: ...]`, `[TRUNCATED ...]`). Look-alikes count as the real thing:
full-width and small-form brackets and letters (NFKC folds them), Cyrillic and Greek letters
that look Latin, HTML entities for `<`, and invisible format characters (zero-width space,
joiners) slipped into a word.

Matching runs on a folded copy of the text that keeps, for every folded character, the index of
the original character it came from; the edits are made to the original, so everything else a
candidate wrote reaches the arbiter unchanged:

- a tag-like opening becomes `‹` (`<ranking` -> `‹ranking`, `&lt;/candidate` -> `‹/candidate`);
- a label or note gets `quoted ` in front (`Ranking:` -> `quoted Ranking:`).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["TAG_NAMES", "neutralise"]

TAG_NAMES = ("candidate", "question", "ranking", "confidence", "refine", "answer", "previous")
# Labels a reader might take for a verdict. Not `answer:` or `question:`: too common in honest text.
_LABELS = ("ranking", "confidence", "refine", "verdict", "code metrics", "truncated")

_NEUTRAL = "‹"  # what an opening bracket of a tag-like sequence becomes
# Opening angle brackets NFKC leaves alone, folded to "<" for matching (‹ is our own neutral form).
_BRACKETS = "‹〈⟨〈ᐸ˂❮⧼≺«"
# Letters that look Latin, from Unicode's confusables list (lower case: matching is on casefolded text).
_LOOKALIKES = {
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "ѐ": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j",
    "ӏ": "l", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s", "т": "t", "у": "y", "х": "x", "ԝ": "w", "к": "k",
    "м": "m", "п": "n", "ո": "n", "ց": "g", "ɡ": "g", "ı": "i", "ℓ": "l",
    "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
    "ϲ": "c", "ϳ": "j",
}

_OPEN = r"(?P<open><|&lt;|&#0*60;|&#x0*3c;)"
_TAG = re.compile(_OPEN + r"[\s/\\]{0,3}(?:" + "|".join(TAG_NAMES) + r")(?![a-z])")
_LABEL = re.compile(r"(?P<label>(?:" + "|".join(w.replace(" ", r"[\s_-]*") for w in _LABELS) + r"))\s*[:=]")
_NOTE = re.compile(r"\[[\s*_]*(?P<label>code[\s_-]*metrics|truncated)")


@lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    """What one character reads as: "" for invisible format characters, else its NFKC form,
    case-folded, with look-alike letters and brackets mapped to the Latin ones."""
    if unicodedata.category(ch) == "Cf":
        return ""
    if ch in _BRACKETS:
        return "<"
    folded = unicodedata.normalize("NFKC", ch).casefold()
    return "".join(_LOOKALIKES.get(c, c) for c in folded)


def _fold(text: str) -> tuple[str, list[int] | None]:
    """(the folded text, for each folded character the index of its source; None = identity)."""
    if text.isascii():
        return text.lower(), None
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        folded = _fold_char(ch)
        out.append(folded)
        origin.extend([i] * len(folded))
    return "".join(out), origin


def neutralise(text: str) -> str:
    """`text` with every tag-like opening, verdict label and note-like bracket defused."""
    folded, origin = _fold(text)

    def at(j: int) -> int:
        return j if origin is None else origin[j]

    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the original text
    for m in _TAG.finditer(folded):
        start, end = m.span("open")
        edits.append((at(start), at(end - 1) + 1, _NEUTRAL))
    for pattern in (_LABEL, _NOTE):
        for m in pattern.finditer(folded):
            start = at(m.start("label"))
            edits.append((start, start, "quoted "))
    if not edits:
        return text
    out = []
    last = 0
    for start, end, replacement in sorted(set(edits)):  # a note is also a label: one edit
        if start < last:
            continue  # overlaps an earlier edit (a label inside a tag-like run): already defused
        out.append(text[last:start])
        out.append(replacement)
        last = end
    out.append(text[last:])
    return "".join(out)
