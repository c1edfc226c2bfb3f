"""What an `openai`-kind upstream is sent of what the client asked for, by one rule:

- OpenAI's own API (api.openai.com) refuses what it does not know, so it gets only the fields
  of its chat-completions schema, and messages without the `cache_control` markers other
  providers read;
- every other OpenAI-compatible server (vLLM, NIM, llama.cpp, Mercury, OpenRouter, a LiteLLM
  proxy) takes vendor extensions and ignores what it does not know, so it gets everything the
  client sent: `top_k`, `chat_template_kwargs`, `cache_control` markers...;
- both: never the operator's fields (endpoints, keys, headers: backends/client_fields.py);
  Anthropic's thinking (a `thinking` object from a /v1/messages client, the signed
  `thinking_blocks` of earlier turns) has no place in a chat request -- `reasoning_effort`
  carries its meaning, and only Anthropic can read its signatures -- while a `thinking` flag is
  route's own switch for the local engine, which `route engine serve` takes.

Pure functions on plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from backends.anthropic_format import ANTHROPIC_ONLY
from backends.client_fields import operator_owned
from backends.types import Message

__all__ = ["OPENAI_CHAT_FIELDS", "chat_messages", "is_openai_itself", "request_fields"]

# The request fields of OpenAI's chat-completions API.
OPENAI_CHAT_FIELDS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
    "safety_identifier", "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature",
    "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})


def is_openai_itself(base_url: str | None) -> bool:
    host = urlsplit(base_url or "").hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


def request_fields(extra: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """The client's extra fields an upstream is sent (`strict`: OpenAI's own API)."""
    out = {}
    for key, value in extra.items():
        if (key == "thinking" and not isinstance(value, bool)) or key in ANTHROPIC_ONLY:
            continue
        if key not in OPENAI_CHAT_FIELDS if strict else operator_owned(key):
            continue
        out[key] = value
    return out


def chat_messages(messages: list[Message], *, strict: bool) -> list[Message]:
    """`messages` for an OpenAI-compatible upstream (`strict`: OpenAI's own API), copying only
    what changes."""
    return [_message(m, strict) for m in messages]


def _message(message: Message, strict: bool) -> Message:
    content = message.get("content")
    parts_marked = strict and isinstance(content, list) and any(
        isinstance(p, dict) and "cache_control" in p for p in content)
    dropped = ("thinking_blocks", "cache_control") if strict else ("thinking_blocks",)
    if not parts_marked and not any(key in message for key in dropped):
        return message
    out = {k: v for k, v in message.items() if k not in dropped}
    if parts_marked and isinstance(content, list):
        out["content"] = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
                          for p in content]
    return out
