"""Scripted tool calls: a scripted reply may be an object instead of a string,

    {"content": "Let me check.", "tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}}]}

answered as OpenAI tool calls (finish reason `tool_calls`), and streamed as real providers
stream them: the call's id and name first, then its arguments in several pieces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["Reply", "argument_pieces", "check_reply", "split_reply"]

Reply = str | Mapping[str, Any]
_PIECES = 3  # argument fragments per call: enough to test reassembly, as providers send many


def check_reply(reply: Any) -> str | None:
    """What is wrong with one scripted reply, or None."""
    if isinstance(reply, str):
        return None
    if not isinstance(reply, Mapping) or not set(reply) <= {"content", "tool_calls"}:
        return "a reply is a string or an object with `content` and/or `tool_calls`"
    if not isinstance(reply.get("content", ""), str):
        return "a reply's `content` must be a string"
    calls = reply.get("tool_calls", [])
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) and isinstance(c.get("name"), str)
                                              for c in calls):
        return "`tool_calls` must be a list of {name, arguments, id?} objects"
    return None


def split_reply(reply: Reply, turn: int) -> tuple[str, list[dict[str, Any]]]:
    """The reply's text and its tool calls in OpenAI's format (ids made up when not scripted)."""
    if isinstance(reply, str):
        return reply, []
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or ()):
        arguments = call.get("arguments", {})
        calls.append({"id": call.get("id") or f"call_sim_{turn}_{i}", "type": "function",
                      "function": {"name": call["name"],
                                   "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}})
    return str(reply.get("content") or ""), calls


def argument_pieces(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream deltas for `calls`: per call, the header (id, name, empty arguments), then the
    arguments in up to _PIECES fragments, each keyed by the call's index."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        function = call["function"]
        deltas.append({"index": index, "id": call["id"], "type": "function",
                       "function": {"name": function["name"], "arguments": ""}})
        arguments = function["arguments"]
        size = max(1, -(-len(arguments) // _PIECES))
        deltas.extend({"index": index, "function": {"arguments": arguments[i:i + size]}}
                      for i in range(0, len(arguments), size))
    return deltas
