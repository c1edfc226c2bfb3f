"""A scripted arbiter for the simulated server: answers consortium prompts in our format.

For tests, benchmarks and demos without a real model. Plug it into a simulator profile:

    SimProfile(ttft_s=0.05, responder=arbiter_responder(confidence=0.9))

It reads the prompt the way a model would see it: the nonce from the instructions, the
candidates from the nonce-tagged blocks; it ranks them by `score` (default: shorter is better)
and, for synthesis prompts, writes the best candidate back as the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from backends.types import Message, content_text

__all__ = ["arbiter_responder", "judge_when_asked", "read_candidates"]

_NONCE = re.compile(r"<ranking-([0-9a-f]+)>")


def read_candidates(messages: list[Message]) -> tuple[str | None, list[str]]:
    """(nonce, candidate texts) as found in an arbiter prompt; (None, []) if it is not one."""
    text = "\n".join(content_text(m.get("content")) for m in messages)
    found = _NONCE.search(text)
    if not found:
        return None, []
    nonce = found.group(1)
    blocks = re.findall(rf'<candidate-{nonce} number="\d+">\n(.*?)\n</candidate-{nonce}>', text, re.DOTALL)
    return nonce, blocks


def arbiter_responder(*, confidence: float = 0.9, score: Callable[[str], float] | None = None,
                      refine: str = "none", seen: list[int] | None = None,
                      ties: bool = False) -> Callable[[list[Message]], str]:
    """A simulator `responder`. `score(text)`: higher is better (default: shorter is better).
    `seen`, if given, gets the number of candidate blocks of each prompt appended. `ties`:
    candidates of equal score are ranked tied (`1 = 2`), as a judge asked for ties would."""
    score = score or (lambda text: -len(text))

    def respond(messages: list[Message]) -> str:
        nonce, candidates = read_candidates(messages)
        if nonce is None:
            return "[simulated arbiter] this is not an arbiter prompt"
        if seen is not None:
            seen.append(len(candidates))
        scores = [score(c) for c in candidates]
        order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
        ranking = _ranking(order, scores, ties)
        reply = (f"<ranking-{nonce}>{ranking}</ranking-{nonce}>\n"
                 f"<confidence-{nonce}>{confidence}</confidence-{nonce}>\n"
                 f"<refine-{nonce}>{refine}</refine-{nonce}>\n")
        if "synthesized answer" in content_text(messages[0].get("content")) and candidates:
            best = re.sub(r"\n\[(code metrics|TRUNCATED)[^\n]*", "", candidates[order[0]])
            reply += f"<answer-{nonce}>{best}</answer-{nonce}>\n"
        return reply

    return respond


def _ranking(order: list[int], scores: list[float], ties: bool) -> str:
    """'2, 1, 3', or with `ties` '2 = 1, 3' where scores are equal."""
    groups: list[list[int]] = []
    for i in order:
        if ties and groups and scores[groups[-1][0]] == scores[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return ", ".join(" = ".join(str(i + 1) for i in group) for group in groups)


def judge_when_asked(**options) -> Callable[[list[Message]], str | None]:
    """A responder that judges arbiter prompts and returns None for every other prompt, so the
    simulator answers those as the plain model it simulates (`route sim` uses it for every model)."""
    judge = arbiter_responder(**options)

    def respond(messages: list[Message]) -> str | None:
        nonce, _ = read_candidates(messages)
        return judge(messages) if nonce else None

    return respond
