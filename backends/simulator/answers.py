"""Deterministic fake answers and the token counting the simulator reports.

A token is one whitespace-separated word with the whitespace before it, as real tokenizers
split text (" word"), so joining the tokens gives back the text exactly and a cut answer never
ends in a space. The same (model, messages, seed, temperature) always gives
the same answer; changing the seed changes the filler, which is what a consortium sampling one
model N times needs to see.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from backends.simulator.tools import argument_pieces
from backends.thinking import CLOSE, OPEN
from backends.types import Message, content_text, last_user_text

__all__ = ["Answer", "count_tokens", "finish", "generate", "prompt_tokens", "split_tokens", "with_thought",
           "with_tool_calls"]

_TOKEN = re.compile(r"\s*\S+")
_ECHO_WORDS = 8

# Neutral words that read like an answer without pretending to be one.
_VOCABULARY = (
    "the answer depends on context and the constraints given here so consider each case "
    "carefully first then compare the options below because a simple approach often works "
    "well while edge cases need more care in practice we check inputs validate results and "
    "measure latency throughput cost quality before choosing one path over another model "
    "output should stay short clear correct and easy to verify step by step"
).split()


@dataclass(frozen=True, slots=True)
class Answer:
    """What a request gets: tokens to send, why generation ended, and the usage to report."""

    tokens: list[str]
    finish_reason: str  # "stop", "length" or "tool_calls", as OpenAI reports it
    prompt_tokens: int
    tool_calls: tuple[dict, ...] = ()  # OpenAI format, scripted (backends/simulator/tools.py)
    cached_tokens: int = 0  # the part of prompt_tokens its simulated prompt cache served

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def completion_tokens(self) -> int:
        """The text's tokens, and a tool call's: each piece it streams in is paced like a token
        (app.py), so it is counted like one, as a provider counts the call it writes."""
        return len(self.tokens) + (len(argument_pieces(list(self.tool_calls))) if self.tool_calls else 0)


def split_tokens(text: str) -> list[str]:
    """Words with their leading whitespace; `"".join(split_tokens(t)) == t` whenever `t` has
    a word (trailing whitespace rides on the last token)."""
    tokens = _TOKEN.findall(text)
    trailing = text[len(text.rstrip()):]
    if tokens and trailing:
        tokens[-1] += trailing
    return tokens


def count_tokens(text: str) -> int:
    return len(text.split())


def prompt_tokens(messages: Sequence[Message]) -> int:
    """Words across every message, the simulator's stand-in for a tokenizer."""
    return sum(count_tokens(content_text(m.get("content"))) for m in messages)


def generate(
    model: str,
    messages: Sequence[Message],
    n_tokens: int,
    *,
    seed: int | None = None,
    temperature: float | None = None,
) -> str:
    """A labelled answer of exactly `n_tokens` words (fewer only if `n_tokens` < 2)."""
    head = f"[simulated {model}]".split()
    echo = last_user_text(list(messages)).split()[:_ECHO_WORDS]
    words = head + (["Re:", *echo, "--"] if echo else [])
    rng = random.Random(_digest(model, messages, seed, temperature))
    while len(words) < n_tokens:
        words.append(rng.choice(_VOCABULARY))
    return " ".join(words[: max(n_tokens, 0)])


def with_thought(text: str, model: str, messages: Sequence[Message], n_tokens: int) -> str:
    """`text` after a labelled thought of `n_tokens` words, between Gemma 4's thinking markers
    (`<|channel>thought\n` ... `<channel|>`), as DiffusionGemma writes it with thinking on; the
    client splits it off as it would a real model's."""
    if n_tokens <= 0:
        return text
    rng = random.Random(_digest(f"{model} thinking", messages, None, None))
    words = [*f"[simulated thinking {model}]".split()]
    while len(words) < n_tokens:
        words.append(rng.choice(_VOCABULARY))
    return f"{OPEN}thought\n{' '.join(words[:n_tokens])}{CLOSE}{text}"


def with_tool_calls(answer: Answer, calls: Sequence[dict]) -> Answer:
    """`answer` ending in tool calls (unless it was cut at max_tokens first)."""
    if not calls or answer.finish_reason == "length":
        return answer
    return replace(answer, tool_calls=tuple(calls), finish_reason="tool_calls")


def finish(text: str, max_tokens: int | None, stop: Sequence[str], prompt: int) -> Answer:
    """Cut `text` at the first stop string, then at `max_tokens`, as a server would."""
    finish_reason = "stop"
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    if cut >= 0:
        text = text[:cut]
    tokens = split_tokens(text)
    if max_tokens is not None and len(tokens) > max_tokens:
        tokens = tokens[:max_tokens]
        finish_reason = "length"
    return Answer(tokens=tokens, finish_reason=finish_reason, prompt_tokens=prompt)


def _digest(
    model: str, messages: Sequence[Message], seed: int | None, temperature: float | None
) -> int:
    hasher = hashlib.blake2b(digest_size=8)
    for part in (model, repr(seed), repr(temperature)):
        hasher.update(part.encode())
        hasher.update(b"\0")
    for message in messages:
        hasher.update(str(message.get("role")).encode())
        hasher.update(content_text(message.get("content")).encode())
        hasher.update(b"\0")
    return int.from_bytes(hasher.digest(), "big")
