"""Signed thinking handed to clients so that it comes back: what every protocol writes of an
answer's signed and redacted thinking blocks (Anthropic's, which Anthropic refuses a tool loop
without), and how the Responses API carries them.

- Messages: the blocks themselves.
- Chat completions: `thinking_blocks` on the message, as LiteLLM writes them (in a stream, each
  block whole in the delta its signature arrives with; its text also went out piece by piece as
  `reasoning_content`); clients send them back on the assistant message, and the `anthropic`
  kind sends them on. Clients that keep only `reasoning_content` get their blocks back from the
  backend (backends/anthropic_thinking.py).
- Responses: the reasoning item's `encrypted_content`, when the client asks for it with
  `include: ["reasoning.encrypted_content"]` (the API's own way to keep reasoning without stored
  state: Codex always does). It comes back on the reasoning item that precedes the turn's message
  and tool calls, and becomes that assistant turn's `thinking_blocks` again.
- Gemini: the same encoding as the first function call's `thoughtSignature`, which Gemini's
  clients send back with the call (router/server/protocols/gemini_events.py).

`encrypted_content` is an encoding, not a cipher, and carries no MAC. What it holds the client
already has (the thinking text is the item's summary and content; signatures and redacted data
are the provider's, opaque, and no secret of ours), so there is nothing to hide; and a client that
changes it gains nothing it could not send as a Messages client: only well-formed thinking
blocks come out of it, and the provider checks its own signatures, refusing any block altered. A
key per server would instead break every conversation at a restart, or across the replicas of a
fleet, for no protection the provider does not already give. Compressed (thinking is text),
with the decompressed size bounded.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from backends.types import Completion

__all__ = ["ENCRYPTED_CONTENT", "Sealer", "blocks_from", "encrypted_content", "sealed_blocks"]

ENCRYPTED_CONTENT = "reasoning.encrypted_content"  # what a Responses client names in `include`
_PREFIX = "route-thinking-1."  # ours; anything else (OpenAI's own) is not
_MAX_BYTES = 4 << 20  # decompressed: far above any thinking budget, far below harm


def sealed_blocks(completion: Completion) -> list[dict[str, Any]]:
    """The answer's signed and redacted thinking blocks, in order (none for thinking nobody signed)."""
    return [dict(b) for b in completion.metadata.get("thinking_blocks") or () if isinstance(b, Mapping)]


class Sealer:
    """One stream's thinking, cut into the blocks its signatures seal."""

    __slots__ = ("_text",)

    def __init__(self) -> None:
        self._text: list[str] = []

    def feed(self, text: str, signature: str | None, redacted: str | None) -> list[dict[str, Any]]:
        """The blocks this piece completes: a signature seals the text since the last one."""
        if text:
            self._text.append(text)
        out: list[dict[str, Any]] = []
        if signature:
            out.append({"type": "thinking", "thinking": "".join(self._text), "signature": signature})
            self._text = []
        if redacted is not None:
            out.append({"type": "redacted_thinking", "data": redacted})
        return out


def encrypted_content(blocks: Iterable[Mapping[str, Any]]) -> str:
    return _PREFIX + base64.urlsafe_b64encode(zlib.compress(orjson.dumps(list(blocks)))).decode()


def blocks_from(value: Any) -> list[dict[str, Any]]:
    """The blocks an `encrypted_content` of ours holds; none for anything else (another
    provider's reasoning, or damaged)."""
    if not isinstance(value, str) or not value.startswith(_PREFIX):
        return []
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.urlsafe_b64decode(value[len(_PREFIX):]), _MAX_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            return []
        blocks = orjson.loads(raw)
    except (ValueError, binascii.Error, zlib.error):
        return []
    return [kept for kept in map(_block, blocks if isinstance(blocks, list) else ()) if kept is not None]


def _block(block: Any) -> dict[str, Any] | None:
    """A well-formed signed or redacted thinking block, with nothing else in it; else None."""
    if not isinstance(block, dict):
        return None
    if block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str):
        return {"type": "redacted_thinking", "data": block["data"]}
    if block.get("type") == "thinking" and isinstance(block.get("thinking"), str) \
            and isinstance(block.get("signature"), str) and block["signature"]:
        return {"type": "thinking", "thinking": block["thinking"], "signature": block["signature"]}
    return None
