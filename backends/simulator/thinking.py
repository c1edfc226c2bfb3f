"""The simulated Anthropic model's thinking, and Anthropic's rule for sending it back.

A request that turns thinking on (`thinking: {type: enabled | adaptive}`) is answered with a
labelled thought in a thinking block before the answer, signed by the simulator (an HMAC under a
key it makes at start, so only it can sign and it can check). Anthropic's documented test string
in the last user turn adds a `redacted_thinking` block first, as Anthropic answers it.

Under a profile's `signed_thinking`, the endpoint enforces what Anthropic does: a thinking block
whose signature the simulator did not issue (or whose text was changed) is refused, and so is a
request with thinking enabled whose last turn answers tool calls of an assistant turn that does
not start with the thinking it was given -- with Anthropic's 400 and its wording. (Not under
`adaptive` thinking, where the model may have chosen not to think before calling a tool.) Always, as Anthropic
does: a thinking budget under 1024 tokens, or not under `max_tokens`, is refused.

Written apart from the router's own handling of the rule (backends/anthropic_thinking.py), so
that a mistake there cannot hide itself here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from backends.simulator.answers import count_tokens
from backends.types import content_text

__all__ = ["REDACTED_TRIGGER", "Signer", "budget_refusal", "thinking_on", "thought_words"]

# Anthropic's documented string that makes a model's thinking come back redacted.
REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
_DOCS = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_MIN_BUDGET = 1024
_THOUGHT = ("first read what is asked then check which tool fits and what its result says before "
            "answering plainly").split()


def thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def budget_refusal(body: Mapping[str, Any]) -> str | None:
    """Anthropic's words for a thinking budget it refuses, or None."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < _MIN_BUDGET:
        return f"thinking.enabled.budget_tokens: Input should be greater than or equal to {_MIN_BUDGET}"
    if isinstance(body.get("max_tokens"), int) and budget >= body["max_tokens"]:
        return f"`max_tokens` must be greater than `thinking.budget_tokens`. {_DOCS}"
    return None


def thought_words(model: str, turns: Sequence[Mapping[str, Any]], words: int) -> str:
    """A labelled thought of `words` words, the same for the same conversation."""
    seed = hashlib.blake2b(repr([model, [content_text(t.get("content")) for t in turns]]).encode(),
                           digest_size=8).digest()
    rng = random.Random(seed)
    out = f"[simulated thinking {model}]".split()
    while len(out) < words:
        out.append(rng.choice(_THOUGHT))
    return " ".join(out[:max(words, 1)])


class Signer:
    """Signs the thinking the simulator writes, and checks what comes back."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, kind: bytes, data: bytes) -> bytes:
        return hmac.new(self._key, kind + b"\0" + data, hashlib.sha256).digest()

    def blocks(self, model: str, body: Mapping[str, Any], turns: Sequence[Mapping[str, Any]],
               words: int) -> list[dict[str, Any]]:
        """The thinking blocks of an answer to `body` (chat-format `turns`), signed."""
        text = thought_words(model, turns, words)
        out: list[dict[str, Any]] = []
        if REDACTED_TRIGGER in _last_user_text(body):
            nonce = secrets.token_bytes(16)
            out.append({"type": "redacted_thinking",
                        "data": base64.b64encode(nonce + self._mac(b"redacted", nonce)).decode()})
        out.append({"type": "thinking", "thinking": text,
                    "signature": base64.b64encode(self._mac(b"thinking", text.encode())).decode()})
        return out

    @staticmethod
    def tokens(blocks: Sequence[Mapping[str, Any]]) -> int:
        """Output tokens the blocks cost (a redacted block's thinking is billed too: a few)."""
        return sum(count_tokens(str(b.get("thinking", ""))) if b["type"] == "thinking" else 8 for b in blocks)

    def valid(self, block: Mapping[str, Any]) -> bool:
        try:
            if block.get("type") == "redacted_thinking":
                raw = base64.b64decode(str(block.get("data", "")), validate=True)
                return len(raw) == 48 and hmac.compare_digest(raw[16:], self._mac(b"redacted", raw[:16]))
            mac = base64.b64decode(str(block.get("signature", "")), validate=True)
            return hmac.compare_digest(mac, self._mac(b"thinking", str(block.get("thinking", "")).encode()))
        except ValueError:
            return False

    def refusal(self, body: Mapping[str, Any]) -> str | None:
        """Anthropic's words for a request its signed-thinking rule refuses, or None."""
        turns = [t for t in body.get("messages") or () if isinstance(t, Mapping)]
        enabled = (body.get("thinking") or {}).get("type") == "enabled"  # adaptive: the model may not have thought
        return self._forged(turns) or (_unsigned(turns) if enabled else None)

    def _forged(self, turns: Sequence[Mapping[str, Any]]) -> str | None:
        for i, turn in enumerate(turns):
            for j, block in enumerate(_blocks(turn)):
                if block.get("type") in ("thinking", "redacted_thinking") and not self.valid(block):
                    field = "signature" if block["type"] == "thinking" else "data"
                    return f"messages.{i}.content.{j}: Invalid `{field}` in `{block['type']}` block"
        return None


def _unsigned(turns: Sequence[Mapping[str, Any]]) -> str | None:
    """The refusal of a last turn answering tool calls whose assistant turn does not start with
    thinking, or None."""
    if len(turns) < 2 or turns[-2].get("role") != "assistant":
        return None
    blocks = _blocks(turns[-2])
    if not any(b.get("type") == "tool_result" for b in _blocks(turns[-1])) or \
            not any(b.get("type") == "tool_use" for b in blocks):
        return None
    found = blocks[0].get("type")
    if found in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{len(turns) - 2}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block "
            "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
            f"thinking blocks from previous turns. To avoid this requirement, disable `thinking`. {_DOCS}")


def _blocks(turn: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = turn.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _last_user_text(body: Mapping[str, Any]) -> str:
    for turn in reversed([t for t in body.get("messages") or () if isinstance(t, Mapping)]):
        if turn.get("role") == "user":
            content = turn.get("content")
            return content if isinstance(content, str) else " ".join(
                str(b.get("text", "")) for b in _blocks(turn) if b.get("type") == "text")
    return ""
