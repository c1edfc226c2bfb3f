"""A variable that is set, when the one a config names is not: `OPENAI_APIKEY` in the config
while `OPENAI_API_KEY` is exported is the commonest reason for "not set". Names only; a value is
never read beyond whether it is empty."""

from __future__ import annotations

import difflib
import os

__all__ = ["lookalike_hint", "set_lookalike"]


def _plain(name: str) -> str:
    return name.upper().replace("_", "").replace("-", "")


def _set_names(excluding: str) -> list[str]:
    return [n for n, v in os.environ.items() if v and n != excluding]


def _close_spelling(name: str, candidates: list[str]) -> str | None:
    # Compared upper-cased, so a case slip does not count against an otherwise close spelling.
    close = difflib.get_close_matches(name.upper(), [n.upper() for n in candidates], n=1, cutoff=0.85)
    return next((n for n in candidates if close and n.upper() == close[0]), None)


def set_lookalike(name: str) -> str | None:
    """The name of a set, non-empty environment variable that `name` (unset) is probably a typo
    of: the same letters apart from case and underscores, else a close spelling."""
    present = _set_names(excluding=name)
    same = next((n for n in present if _plain(n) == _plain(name)), None)
    return same if same is not None else _close_spelling(name, present)


def lookalike_hint(name: str) -> str:
    """` ($OPENAI_API_KEY is set, though: did you mean it?)`, or nothing."""
    other = set_lookalike(name)
    return f" (${other} is set, though: did you mean ${{{other}}}?)" if other else ""
