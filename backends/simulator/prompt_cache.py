"""A simulated provider prompt cache: a prompt prefix the same model saw within `ttl_s` is
served from cache, and its tokens are reported as cached (OpenAI's
`prompt_tokens_details.cached_tokens`; the simulator's Messages endpoint reports them as
`cache_read_input_tokens`), as OpenAI and Anthropic bill a resent conversation.

Prefixes are whole messages, hashed cumulatively, so a conversation that grows by a turn finds
every earlier turn cached; each model keeps at most `MAX_PREFIXES`, the oldest dropped first.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from backends.simulator.answers import prompt_tokens

__all__ = ["MAX_PREFIXES", "PromptCache"]

MAX_PREFIXES = 20_000


class PromptCache:
    """One model's cache. `clock` is monotonic seconds."""

    def __init__(self) -> None:
        self._seen: OrderedDict[bytes, float] = OrderedDict()  # prefix digest -> when last seen

    def read(self, messages: Sequence[dict[str, Any]], ttl_s: float, now: float) -> int:
        """Tokens of the longest prefix of `messages` seen within `ttl_s`; records every prefix
        of this prompt as seen now."""
        cached, digest = 0, b""
        for k, message in enumerate(messages, start=1):
            digest = hashlib.blake2b(digest + json.dumps(message, sort_keys=True).encode(), digest_size=16).digest()
            seen = self._seen.pop(digest, None)
            if seen is not None and now - seen <= ttl_s and k < len(messages):
                cached = prompt_tokens(messages[:k])
            self._seen[digest] = now
        while len(self._seen) > MAX_PREFIXES:
            self._seen.popitem(last=False)
        return cached
