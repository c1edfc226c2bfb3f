"""Mercury's `diffusing` stream, emulated for diffusion profiles: when a request sets
`"diffusing": true`, every event carries the whole answer so far -- finished canvases, then the
current canvas with the tokens not yet denoised shown masked -- and each canvas is revealed over
`STEPS` events spread across its `canvas_s`. The last event is the answer itself. The openai
backend turns these into DraftChunks, so `route --watch` shows the canvas denoising.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from backends.simulator.profiles import SimProfile

__all__ = ["MASK", "STEPS", "drafts"]

STEPS = 4  # events per canvas
MASK = "░"  # a token still noise


def _masked(token: str) -> str:
    word = token.lstrip()
    return token[: len(token) - len(word)] + MASK * max(1, min(len(word), 6))


def drafts(tokens: list[str], profile: SimProfile) -> Iterator[tuple[float, str]]:
    """(seconds after the request, the whole draft then), ending with the full answer."""
    size = profile.canvas_length
    for start in range(0, max(1, len(tokens)), size):
        canvas = tokens[start:start + size]
        # Which step reveals each token: a fixed shuffle, so a draft is stable run to run.
        order = list(range(len(canvas)))
        random.Random(len(tokens) * 7919 + start).shuffle(order)
        reveal_at = {position: rank * STEPS // max(1, len(canvas)) for rank, position in enumerate(order)}
        done = "".join(tokens[:start])
        for step in range(STEPS):
            due = profile.ttft_s + (start // size + (step + 1) / STEPS) * profile.canvas_s
            shown = [t if reveal_at[i] <= step else _masked(t) for i, t in enumerate(canvas)]
            yield due, done + "".join(shown)
