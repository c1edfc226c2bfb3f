"""A scripted backend kind for the sessions benchmark: it answers what the session's script says
this model answers now (text, a tool call, an empty or cut-off answer, a refusal), through the
base class's wire path (backends/base.py: `_wire` -> Assembly -> Completion), so usage, cost and
tool calls reach the router as any provider's do.

Prompt caching is the simulator's (backends/simulator/prompt_cache.py): a prefix this backend
saw within `TTL_S` on the script's clock is billed as cached. Tokens are the simulator's too
(words), the tool schemas counted in the prompt (and in its cached prefix: a provider caches
them first).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import ClassVar

from backends.base import Backend, BackendSettings, Delta
from backends.capabilities import Capabilities
from backends.deadline import Deadline
from backends.registry import register_kind
from backends.simulator.answers import count_tokens, prompt_tokens
from backends.simulator.prompt_cache import PromptCache
from backends.types import Request, Usage

__all__ = ["KIND", "TTL_S", "Answer", "ScriptedBackend"]

KIND = "scripted-session"
TTL_S = 300.0  # a provider's shortest prompt-cache lifetime (Anthropic's and OpenAI's: five minutes)


@dataclass(frozen=True, slots=True)
class Answer:
    """One model answer: `text`, and a tool call when `tool` (name, arguments) is set."""

    text: str
    tool: dict[str, str] | None = None
    call_id: str = ""
    finish_reason: str = "stop"


# (backend name, request) -> (the answer, the script's clock in seconds)
Script = Callable[[str, Request], tuple[Answer, float]]


class ScriptedBackend(Backend):
    kind = KIND
    simulated = True
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True)
    wire_task = False

    def __init__(self, settings: BackendSettings):
        super().__init__(settings)
        self.script: Script | None = None
        self.cache = PromptCache()

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        assert self.script is not None, "the benchmark sets each scripted backend's script"
        answer, now = self.script(self.name, request)
        tools = count_tokens(json.dumps(request.extra.get("tools") or []))
        cached = self.cache.read(request.messages, TTL_S, now)
        usage = Usage(input_tokens=prompt_tokens(request.messages) + tools,
                      output_tokens=count_tokens(answer.text) + (count_tokens(answer.tool["arguments"]) + 8
                                                                 if answer.tool else 0),
                      cache_read_tokens=cached + tools if cached else 0)
        calls = [{"index": 0, "id": answer.call_id, "type": "function", "function": dict(answer.tool)}] \
            if answer.tool else ()
        yield Delta(text=answer.text, tool_calls=calls, usage=usage, finish_reason=answer.finish_reason,
                    simulated=True)


register_kind(KIND, ScriptedBackend)
