"""Which model names an OpenAI-compatible server serves, and a did-you-mean when ours is not one.

vLLM serves exactly the name it was started with and answers any other with 404, so a model id
that differs only in case (DiffusionGemma is published as `...-26B-A4B-it`) fails against it.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["not_served_hint", "served_models"]


def served_models(body: Any) -> list[str]:
    """The ids in a GET /v1/models body (an empty list when it is not one)."""
    try:
        data = body.get("data", [])
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
    except (AttributeError, TypeError):
        return []


def not_served_hint(model: str, served: list[str]) -> str:
    """Which names a server does serve, led by a case-insensitive (then fuzzy) did-you-mean."""
    same = [s for s in served if s.casefold() == model.casefold()]
    close = same or difflib.get_close_matches(model, served, n=1, cutoff=0.6)
    listed = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
    mean = f"did you mean {close[0]!r}? (set the backend's `model:` to it) " if close else ""
    return f"{mean}it serves: {listed}"
