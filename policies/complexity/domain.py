"""A deployment's own vocabulary, hashed: the words and word pairs of its prompts as buckets.

Adapting the scorer to a user's traffic (`training/adapt.py`) may learn a weight per word and
per pair of adjacent words (the kind of signal that carries most in-domain gain: subjects,
task names, the phrasing of a kind of request). They are stored as hash buckets, not as text:
a weights file learned from private prompts holds numbers, never the words themselves.

A prompt's domain value is the mean weight of its distinct buckets (0 for buckets the table
lacks), so a long prompt is not pushed further for having more words. Pure and deterministic:
`zlib.crc32` is the same on every machine and run (Python's `hash` of a string is not).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from itertools import repeat

__all__ = ["BUCKETS", "MAX_WORDS", "domain_value", "tokens"]

BUCKETS = 1 << 20  # hash space; a deployment's vocabulary of tens of thousands of words rarely collides
MAX_WORDS = 400  # words of a prompt read (its first ones): bounds the cost of a huge prompt
_MASK = BUCKETS - 1
_PAIR = 0x9E3779B1  # mixes the first word's hash into the pair's (Fibonacci hashing)


def tokens(words: Sequence[str]) -> frozenset[int]:
    """The distinct buckets of `words` (lower-case words in order, as `features.extract` gives
    them): each word of two letters or more, and each pair of adjacent words."""
    hashes = [zlib.crc32(w.encode("ascii", "ignore")) for w in words[:MAX_WORDS]]
    found = {h & _MASK for h, w in zip(hashes, words) if len(w) > 1}
    found.update(((a * _PAIR) ^ b) & _MASK for a, b in zip(hashes, hashes[1:]))
    return frozenset(found)


def domain_value(buckets: frozenset[int] | set[int], weight_of: Callable[[int, float], float]) -> float:
    """Mean weight of the prompt's buckets (`weight_of` is a table's `get`); 0 for none."""
    return sum(map(weight_of, buckets, repeat(0.0))) / len(buckets) if buckets else 0.0
