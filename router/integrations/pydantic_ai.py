"""The router as a pydantic-ai model (`pip install "latency-router[pydantic-ai]"`).

    from pydantic_ai import Agent
    from router import Router
    from router.integrations.pydantic_ai import RouterModel

    agent = Agent(RouterModel(Router.from_config(), "auto", deadline_s=10), output_type=Forecast)
    result = await agent.run("Forecast for Paris?")

Written against pydantic-ai's `Model` and `StreamedResponse`. Text streams token by token and
tool calls as they form (through the response's parts manager, as pydantic-ai's own models do);
each `ModelResponse` carries the router's decision in `provider_details["route"]` (backend, tier,
score, cost_usd, downgrade, ...) and `model_name` is the backend that answered.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Unpack

from router.integrations import missing_extra

try:  # the framework is an optional extra: without it, say which one to install
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        ModelResponseStreamEvent,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
    from pydantic_ai.profiles import ModelProfile
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.usage import RequestUsage
except ModuleNotFoundError as exc:
    raise missing_extra(exc, "pydantic-ai") from exc

from backends.types import Completion, FinalChunk, TextChunk, ToolCallChunk
from router.core import Router, RouteStream
from router.integrations.common import decision_facts, merged_options, result_facts
from router.options import ModelOptions, resolve_options

__all__ = ["RouterModel"]

# pydantic-ai's per-call settings that are the router's options by another name.
_SETTINGS = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "seed": "seed",
             "parallel_tool_calls": "parallel_tool_calls", "timeout": None}


class RouterModel(Model):
    """A pydantic-ai model answered by a Router. `model`: `auto`, a backend or a consortium;
    `options` (deadline_s, prefer, max_cost_usd, extra, ...) apply to every call, under the
    agent's ModelSettings (max_tokens, temperature, top_p, seed, extra_body)."""

    def __init__(self, router: Router, model: str = "auto", *, settings: ModelSettings | None = None,
                 **options: Unpack[ModelOptions]):
        resolve_options("RouterModel", {**options, "model": model})
        self.router = router
        self.route_model = model
        self.options: dict[str, Any] = {**options, "model": model}
        # JSON-schema output goes out as response_format; the backend must honour it.
        super().__init__(settings=settings, profile=ModelProfile(supports_json_schema_output=True,
                                                                 supports_json_object_output=True))

    @property
    def model_name(self) -> str:
        return self.route_model

    @property
    def system(self) -> str:
        return "route"

    async def request(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        check_allow_model_requests()
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        chat, options = self._call(messages, model_settings, params)
        result = await self.router.acomplete(chat, **options)
        completion = result.completion
        return ModelResponse(parts=_parts(completion), usage=_usage(completion), model_name=completion.backend,
                             provider_name="route", provider_details={"route": result_facts(result)},
                             finish_reason=_finish(completion))

    @contextlib.asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: ModelSettings | None,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncGenerator[StreamedResponse]:
        check_allow_model_requests()
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        chat, options = self._call(messages, model_settings, params)
        route_stream = self.router.astream(chat, **options)
        await route_stream.start()  # decided as a call is: on the fleet's latest state
        streamed = RouterStreamedResponse(model_request_parameters=params, _route_stream=route_stream)
        try:
            yield streamed
        finally:
            await streamed.close_stream()  # a run that stopped early: the upstream call ends

    def _call(self, messages: list[ModelMessage], settings: ModelSettings | None,
              params: ModelRequestParameters) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        instructions = "\n\n".join(p.content for p in params.instruction_parts or [] if p.content)
        chat = _messages(messages)
        if instructions:
            chat.insert(0, {"role": "system", "content": instructions})
        tools = [_tool(t) for t in [*params.function_tools, *params.output_tools]]
        per_call: dict[str, Any] = {key: (settings or {}).get(name) for name, key in _SETTINGS.items() if key}
        per_call["tools"] = tools or None
        if params.output_tools and not params.allow_text_output:
            per_call["tool_choice"] = "required"  # the output comes as a call to an output tool
        if params.output_mode == "native" and params.output_object is not None:
            out = params.output_object
            per_call["response_format"] = {"type": "json_schema", "json_schema": {
                "name": out.name or "final_result", "schema": out.json_schema, "strict": bool(out.strict)}}
        extra_body = (settings or {}).get("extra_body")
        per_call["extra"] = dict(extra_body) if isinstance(extra_body, dict) else None
        if not tools:
            per_call["parallel_tool_calls"] = None
        return chat, merged_options(self.options, per_call)


@dataclass
class RouterStreamedResponse(StreamedResponse):
    """The router's stream as pydantic-ai events: text deltas, tool-call deltas, then the
    decision and usage once the answer is complete."""

    _route_stream: RouteStream | None = None
    _timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    _chunks: Any = None

    def __post_init__(self) -> None:
        assert self._route_stream is not None
        self.provider_details = {"route": decision_facts(self._route_stream.decision)}

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        assert self._route_stream is not None
        self._chunks = self._route_stream.__aiter__()
        async for chunk in self._chunks:
            if isinstance(chunk, TextChunk) and chunk.text:
                for event in self._parts_manager.handle_text_delta(vendor_part_id="content", content=chunk.text):
                    yield event
            elif isinstance(chunk, ToolCallChunk):
                for event in self._parts_manager.handle_tool_call_delta_events(
                        vendor_part_id=chunk.index, tool_name=chunk.name, args=chunk.arguments or None,
                        tool_call_id=chunk.id):
                    yield event
            elif isinstance(chunk, FinalChunk):
                self._finish(chunk.completion)

    def _finish(self, completion: Completion) -> None:
        assert self._route_stream is not None
        result = self._route_stream.result
        self.provider_details = {"route": result_facts(result) if result is not None else {
            "backend": completion.backend, "cost_usd": completion.cost_usd}}
        self.finish_reason = _finish(completion)
        self._usage = _usage(completion)

    async def close_stream(self) -> None:
        if self._chunks is not None:
            with contextlib.suppress(RuntimeError):  # already closed, or running
                await self._chunks.aclose()

    @property
    def model_name(self) -> str:
        result = self._route_stream.result if self._route_stream is not None else None
        return result.completion.backend if result is not None else "auto"

    @property
    def provider_name(self) -> str:
        return "route"

    @property
    def provider_url(self) -> None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": tool.parameters_json_schema}}


def _messages(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai's history as OpenAI chat messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                out.extend(_request_part(part))
        elif isinstance(message, ModelResponse):
            out.append(_response_message(message))
    return out


def _request_part(part: Any) -> list[dict[str, Any]]:
    if isinstance(part, SystemPromptPart):
        return [{"role": "system", "content": part.content}]
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return [{"role": "user", "content": part.content}]
        texts = [c if isinstance(c, str) else getattr(c, "content", "") for c in part.content]
        return [{"role": "user", "content": "\n".join(t for t in texts if isinstance(t, str))}]
    if isinstance(part, ToolReturnPart):
        return [{"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()}]
    if isinstance(part, RetryPromptPart):
        if part.tool_name is None:
            return [{"role": "user", "content": part.model_response()}]
        return [{"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()}]
    return []  # parts with no chat form (instruction bookkeeping) are carried by the instructions


def _response_message(message: ModelResponse) -> dict[str, Any]:
    text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
    calls = [{"id": p.tool_call_id, "type": "function",
              "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
             for p in message.parts if isinstance(p, ToolCallPart)]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _parts(completion: Completion) -> list[TextPart | ToolCallPart]:
    parts: list[TextPart | ToolCallPart] = [TextPart(completion.text)] if completion.text else []
    for call in completion.tool_calls or ():
        function = call.get("function") or {}
        parts.append(ToolCallPart(tool_name=function.get("name") or "", args=function.get("arguments") or "{}",
                                  tool_call_id=call.get("id") or ""))
    return parts


def _usage(completion: Completion) -> RequestUsage:
    return RequestUsage(input_tokens=completion.usage.input_tokens, output_tokens=completion.usage.output_tokens)


def _finish(completion: Completion) -> Any:
    reason = completion.finish_reason or ("tool_calls" if completion.tool_calls else "stop")
    return {"tool_calls": "tool_call", "stop": "stop", "length": "length"}.get(reason, "stop")
