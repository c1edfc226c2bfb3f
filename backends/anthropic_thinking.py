"""Signed thinking in Anthropic tool loops: given back to the clients that drop it, and the
rule Anthropic enforces, kept before a request is sent.

The rule: while thinking is on, the assistant turn whose tool calls the request's last turn
answers must start with the thinking it came with, signature and all, unchanged; without it the
request is a 400 ("a final `assistant` message must start with a thinking block"). Clients of
Anthropic's protocol send the blocks back themselves; route hands them to chat clients as
`thinking_blocks` and to Responses clients inside `encrypted_content`. Many chat clients keep
only the text (OpenCode sends `reasoning_content` back, nothing else), so each anthropic backend
remembers, by tool call id, the signed blocks of its last answers that called tools
(`SignedThinking`, in this process): an assistant turn that comes back with such a call and the
same thinking text gets its blocks back. The text must match, so a tool call id alone (which
another caller may have seen) never brings someone else's thinking into a request.

Where the blocks cannot be found (another process answered, the client kept no text) while
thinking is `enabled`, thinking is left off for that one call, as LiteLLM does, and the earlier
turns' thinking with it (Anthropic refuses thinking blocks while thinking is off): the call is
answered without thinking rather than refused. (Under `adaptive` thinking the model may have
chosen not to think before its calls: such a turn is left as it is.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from backends.thinking import reasoning_of
from backends.types import Message

__all__ = ["SignedThinking", "unsigned_tool_turn", "without_thinking"]

_CAPACITY = 1024  # tool calls remembered per backend: an agent's turns come back within seconds
_THINKING = frozenset({"thinking", "redacted_thinking"})
Blocks = tuple[dict[str, Any], ...]


def _text(blocks: Blocks) -> str:
    return "".join(str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking").strip()


def _signed(message: Mapping[str, Any]) -> bool:
    return any(isinstance(b, Mapping) and (b.get("signature") or b.get("type") == "redacted_thinking")
               for b in message.get("thinking_blocks") or ())


class SignedThinking:
    """The signed and redacted thinking blocks of a backend's recent answers, by the ids of the
    tool calls each answer made."""

    def __init__(self, capacity: int = _CAPACITY):
        self._capacity = capacity
        self._blocks: OrderedDict[str, Blocks] = OrderedDict()

    def remember(self, tool_ids: Sequence[str], blocks: Sequence[Mapping[str, Any]]) -> None:
        """An answer's blocks, under each tool call it made (nothing without both)."""
        kept = tuple(dict(b) for b in blocks)
        if not kept or not _text(kept):
            return  # nothing a client could prove it holds (see the module docstring)
        for tool_id in tool_ids:
            self._blocks[tool_id] = kept
            self._blocks.move_to_end(tool_id)
        while len(self._blocks) > self._capacity:
            self._blocks.popitem(last=False)

    def restore(self, messages: list[Message]) -> list[Message]:
        """`messages` with the blocks put back on each assistant turn that made remembered tool
        calls, sent its thinking text back and lost the signature (a copy only where one changes)."""
        out: list[Message] | None = None
        for index, message in enumerate(messages):
            blocks = self._blocks_of(message)
            if blocks is not None:
                out = out if out is not None else list(messages)
                out[index] = {**message, "thinking_blocks": [dict(b) for b in blocks]}
        return messages if out is None else out

    def _blocks_of(self, message: Mapping[str, Any]) -> Blocks | None:
        if message.get("role") != "assistant" or not message.get("tool_calls") or _signed(message):
            return None
        said = reasoning_of(message).strip()
        for call in message["tool_calls"]:
            blocks = self._blocks.get(str(call.get("id"))) if isinstance(call, Mapping) else None
            if blocks is not None and said and _text(blocks) == said:
                return blocks
        return None


def _blocks(turn: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = turn.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def unsigned_tool_turn(turns: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an Anthropic request's last turn answers tool calls of an assistant turn that does
    not start with thinking: what Anthropic refuses while thinking is on."""
    if len(turns) < 2 or turns[-1].get("role") != "user" or turns[-2].get("role") != "assistant":
        return False
    if not any(b.get("type") == "tool_result" for b in _blocks(turns[-1])):
        return False
    calls = _blocks(turns[-2])
    return any(b.get("type") == "tool_use" for b in calls) and (not calls or calls[0].get("type") not in _THINKING)


def without_thinking(payload: dict[str, Any]) -> None:
    """Thinking off in an Anthropic request, and every turn's thinking blocks out of it."""
    payload.pop("thinking", None)
    for turn in payload.get("messages") or ():
        if any(b.get("type") in _THINKING for b in _blocks(turn)):
            turn["content"] = [b for b in _blocks(turn) if b.get("type") not in _THINKING]
