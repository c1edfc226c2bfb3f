"""Simulated models whose answers follow routing labels, for end-to-end tests of learning.

A routing set gives, per prompt, the quality of a weaker and a stronger model's answer. Here
each side becomes a simulated model whose answer to a labelled prompt states its quality in
plain words ("[simulated light] an answer of quality 0.00 to: ..."), and `quality_of` reads
it back, so a simulated judge (router/consortium/simulated.py, `ties=True`) prefers the answer
the labels say was better and ties where they tie. Prompts the labels lack get the plain
simulated answer. Every answer is SIMULATED and says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from backends.simulator.profiles import SimProfile
from backends.types import Message, last_user_text

__all__ = ["labelled_profiles", "labelled_responder", "quality_of"]

_QUALITY = re.compile(r"an answer of quality (\d+(?:\.\d+)?) to:")


def quality_of(text: str) -> float | None:
    """The quality a labelled simulated answer states, or None for any other text."""
    found = _QUALITY.search(text)
    return float(found.group(1)) if found else None


def labelled_responder(model: str, quality: Mapping[str, float]) -> Callable[[list[Message]], str | None]:
    """A simulator `responder` answering each prompt in `quality` (prompt text -> quality in
    [0, 1]) with an answer stating that quality; None (the plain answer) for the rest."""

    def respond(messages: list[Message]) -> str | None:
        prompt = last_user_text(messages)
        if prompt not in quality:
            return None
        head = " ".join(prompt.split()[:8])
        return f"[simulated {model}] an answer of quality {quality[prompt]:.2f} to: {head}"

    return respond


def labelled_profiles(records: Iterable[Mapping[str, Any]], *, light: str, heavy: str,
                      base: SimProfile = SimProfile()) -> dict[str, SimProfile]:
    """Profiles for a `light` model answering as the records' `local` side and a `heavy` one
    answering as their `hosted` side, both with `base`'s timing."""
    rows = list(records)
    return {
        light: replace(base, responder=labelled_responder(light, {r["prompt"]: float(r["local"]) for r in rows})),
        heavy: replace(base, responder=labelled_responder(heavy, {r["prompt"]: float(r["hosted"]) for r in rows})),
    }
