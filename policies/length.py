"""The prompt-length baseline: longer prompts are assumed harder.

Measured on the shared routing data it is the bar every smarter scorer must clear, and until
one is configured it is what the router uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.types import Message, last_user_text
from policies.scoring import Score

__all__ = ["LengthScorer"]


@dataclass(frozen=True, slots=True)
class LengthScorer:
    """score = chars / (chars + threshold_chars): 0.5 exactly at the threshold, monotone in length."""

    threshold_chars: int = 600
    name: str = "length"

    def score(self, messages: list[Message]) -> Score:
        chars = len(last_user_text(messages))
        value = chars / (chars + self.threshold_chars) if chars else 0.0
        return Score(
            value=value,
            contributions={"prompt_chars": value},
            features={"prompt_chars": float(chars)},
            scorer=self.name,
        )
