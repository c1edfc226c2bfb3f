"""The router as an OpenAI Agents SDK model (`pip install "latency-router[agents]"`).

    from agents import Agent, Runner
    from router import Router
    from router.integrations.openai_agents import RouterModel

    agent = Agent(name="assistant", model=RouterModel(Router.from_config(), "auto", deadline_s=10))
    result = await Runner.run(agent, "What is the weather in Paris?")

Or for every agent of a run: `RunConfig(model_provider=RouterProvider(router))`, where an agent's
model name (or None: `auto`) is a backend, a consortium or `auto`.

The conversation is turned into chat messages and tools, and the stream back into Responses
events, by the SDK's own Chat Completions converters (`agents.models.chatcmpl_converter`,
`chatcmpl_stream_handler`: the ones its LiteLLM and any-llm models use). The router's decision
rides along in the SDK's metadata: a streamed run's `response.completed` event carries it in
`response.metadata` (`route_backend`, `route_tier`, `route_score`, `route_cost_usd`,
`route_downgrade`, ...), and `get_response` returns a `RoutedModelResponse` whose `route` holds
it (`result.raw_responses[i].route`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack, cast

from router.integrations import missing_extra

try:  # the framework is an optional extra: without it, say which one to install
    from agents import ModelResponse, ModelSettings, Usage
    from agents.models.chatcmpl_converter import Converter
    from agents.models.chatcmpl_stream_handler import ChatCmplStreamHandler
    from agents.models.fake_id import FAKE_RESPONSES_ID
    from agents.models.interface import Model, ModelProvider, ModelTracing
    from openai.types.chat import ChatCompletionChunk, ChatCompletionMessage, ChatCompletionMessageFunctionToolCall
    from openai.types.chat.chat_completion_chunk import (
        Choice,
        ChoiceDelta,
        ChoiceDeltaToolCall,
        ChoiceDeltaToolCallFunction,
    )
    from openai.types.chat.chat_completion_message_function_tool_call import Function
    from openai.types.completion_usage import CompletionUsage
    from openai.types.responses import Response
except ModuleNotFoundError as exc:
    raise missing_extra(exc, "agents") from exc

from backends.types import Completion, FinalChunk, TextChunk, ToolCallChunk
from router.integrations.common import merged_options, result_facts, string_facts
from router.options import ModelOptions, resolve_options

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import TResponseInputItem, TResponseStreamEvent
    from agents.tool import Tool

    from router.core import Router

__all__ = ["RoutedModelResponse", "RouterModel", "RouterProvider"]


@dataclass
class RoutedModelResponse(ModelResponse):
    """A ModelResponse that also says what the router decided and who answered (`route`)."""

    route: dict[str, Any] = field(default_factory=dict)


class RouterModel(Model):
    """An Agents SDK `Model` answered by a Router. `model`: `auto`, a backend or a consortium;
    `options` (deadline_s, prefer, max_cost_usd, extra, ...) apply to every call, under the
    agent's ModelSettings (temperature, top_p, max_tokens, tool_choice, extra_body)."""

    def __init__(self, router: Router, model: str = "auto", **options: Unpack[ModelOptions]):
        resolve_options("RouterModel", {**options, "model": model})
        self.router = router
        self.model = model
        self.options: dict[str, Any] = {**options, "model": model}

    # -- the Model interface -----------------------------------------------------------------

    async def get_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                           model_settings: ModelSettings, tools: list[Tool], output_schema: AgentOutputSchemaBase | None,
                           handoffs: list[Handoff], tracing: ModelTracing, *, previous_response_id: str | None = None,
                           conversation_id: str | None = None, prompt: Any | None = None) -> ModelResponse:
        messages, options = self._call(system_instructions, input, model_settings, tools, output_schema, handoffs)
        result = await self.router.acomplete(messages, **options)
        completion = result.completion
        output = Converter.message_to_output_items(_message(completion))
        usage = Usage(requests=1, input_tokens=completion.usage.input_tokens,
                      output_tokens=completion.usage.output_tokens, total_tokens=completion.usage.total_tokens)
        return RoutedModelResponse(output=output, usage=usage, response_id=None, route=result_facts(result))

    async def stream_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                              model_settings: ModelSettings, tools: list[Tool],
                              output_schema: AgentOutputSchemaBase | None, handoffs: list[Handoff],
                              tracing: ModelTracing, *, previous_response_id: str | None = None,
                              conversation_id: str | None = None,
                              prompt: Any | None = None) -> AsyncIterator[TResponseStreamEvent]:
        messages, options = self._call(system_instructions, input, model_settings, tools, output_schema, handoffs)
        route_stream = self.router.astream(messages, **options)
        decision = await route_stream.start()  # decided as a call is: on the fleet's latest state
        response = Response(id=FAKE_RESPONSES_ID, created_at=time.time(), model=self.model, object="response",
                            output=[], tool_choice="auto", top_p=model_settings.top_p,
                            temperature=model_settings.temperature, tools=[],
                            parallel_tool_calls=bool(model_settings.parallel_tool_calls), reasoning=None,
                            metadata=string_facts({"chosen": decision.chosen, "tier": decision.tier}))
        # Closing this generator (a run that stops early) closes the route stream: the upstream call ends.
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            # The handler only iterates its stream: the router's chunks, as the chunks it reads, will do.
            stream = cast(Any, _chat_chunks(chunks, self.model))
            async for event in ChatCmplStreamHandler.handle_stream(response, stream):
                if event.type == "response.completed" and route_stream.result is not None:
                    event.response.metadata = string_facts(result_facts(route_stream.result))
                yield event

    # -- building the call ---------------------------------------------------------------------

    def _call(self, system_instructions: str | None, input: str | list[TResponseInputItem],
              settings: ModelSettings, tools: list[Tool], output_schema: AgentOutputSchemaBase | None,
              handoffs: list[Handoff]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        messages: list[dict[str, Any]] = [dict(m) for m in Converter.items_to_messages(input)]
        if system_instructions:
            messages.insert(0, {"role": "system", "content": system_instructions})
        converted = [dict(Converter.tool_to_openai(t)) for t in tools]
        converted += [dict(Converter.convert_handoff_tool(h)) for h in handoffs]
        response_format = Converter.convert_response_format(output_schema)
        tool_choice = Converter.convert_tool_choice(settings.tool_choice)
        per_call: dict[str, Any] = {
            "temperature": settings.temperature, "top_p": settings.top_p, "max_tokens": settings.max_tokens,
            "tools": converted or None,
            "tool_choice": tool_choice if isinstance(tool_choice, (str, dict)) and converted else None,
            "parallel_tool_calls": settings.parallel_tool_calls if converted else None,
            "response_format": response_format if isinstance(response_format, dict) else None,
            "extra": {**_mapping(settings.extra_body), **_mapping(settings.extra_args)} or None,
        }
        return messages, merged_options(self.options, per_call)


class RouterProvider(ModelProvider):
    """Every agent of a run on one Router: `RunConfig(model_provider=RouterProvider(router))`.
    An agent's model name picks `auto` (None too), a backend or a consortium."""

    def __init__(self, router: Router, **options: Unpack[ModelOptions]):
        resolve_options("RouterProvider", options)
        self.router = router
        self.options = options

    def get_model(self, model_name: str | None) -> Model:
        return RouterModel(self.router, model_name or "auto", **self.options)


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _message(completion: Completion) -> ChatCompletionMessage:
    calls = [ChatCompletionMessageFunctionToolCall(
        id=call.get("id") or f"call_{uuid.uuid4().hex[:24]}", type="function",
        function=Function(name=call["function"]["name"], arguments=call["function"].get("arguments") or "{}"))
        for call in completion.tool_calls or ()]
    return ChatCompletionMessage(role="assistant", content=completion.text or None, tool_calls=calls or None)


async def _chat_chunks(chunks: AsyncIterator[Any], model: str) -> AsyncIterator[ChatCompletionChunk]:
    """The router's chunks as the Chat Completions stream chunks the SDK's handler reads."""
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(delta: ChoiceDelta | None, finish: str | None = None,
              usage: CompletionUsage | None = None) -> ChatCompletionChunk:
        choices = [] if delta is None else [Choice(index=0, delta=delta, finish_reason=finish)]
        return ChatCompletionChunk(id=ident, created=created, model=model, object="chat.completion.chunk",
                                   choices=choices, usage=usage)

    async for item in chunks:
        if isinstance(item, TextChunk) and item.text:
            yield chunk(ChoiceDelta(content=item.text))
        elif isinstance(item, ToolCallChunk):
            function = ChoiceDeltaToolCallFunction(name=item.name, arguments=item.arguments)
            yield chunk(ChoiceDelta(tool_calls=[ChoiceDeltaToolCall(
                index=item.index, id=item.id, type="function" if item.id else None, function=function)]))
        elif isinstance(item, FinalChunk):
            c = item.completion
            finish = c.finish_reason or ("tool_calls" if c.tool_calls else "stop")
            yield chunk(ChoiceDelta(), finish)
            yield chunk(None, usage=CompletionUsage(prompt_tokens=c.usage.input_tokens,
                                                    completion_tokens=c.usage.output_tokens,
                                                    total_tokens=c.usage.total_tokens))
