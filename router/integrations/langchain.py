"""The router as a LangChain chat model (`pip install "latency-router[langchain]"`).

    from router import Router
    from router.integrations.langchain import ChatRouter

    llm = ChatRouter(router=Router.from_config(), model="auto", deadline_s=10)
    llm.invoke("Why is the sky blue?")                     # sync and async, streaming too
    llm.bind_tools([get_weather]).invoke(...)              # tool calls, streamed as tool_call_chunks
    llm.with_structured_output(Forecast).invoke(...)       # by tool call (default) or json_schema

Written against langchain-core's `BaseChatModel`; works anywhere LangChain or LangGraph takes a
chat model. The router's decision is in each message's `response_metadata["route"]` (backend,
tier, score, cost_usd, downgrade, ...); `model_name` there is the backend that answered.
Options a call does not know are refused (TypeError naming the one meant), as the Router does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Literal

from router.integrations import missing_extra

try:  # the framework is an optional extra: without it, say which one to install
    from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
    from langchain_core.language_models import BaseChatModel, LanguageModelInput
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, convert_to_openai_messages
    from langchain_core.messages.tool import tool_call_chunk
    from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langchain_core.runnables import Runnable
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
    from pydantic import BaseModel, ConfigDict
except ModuleNotFoundError as exc:
    raise missing_extra(exc, "langchain") from exc

from backends.types import Completion, FinalChunk, TextChunk, ToolCallChunk
from router.decision import RouteResult
from router.integrations.common import decision_facts, merged_options, result_facts

__all__ = ["ChatRouter"]

# Keywords LangChain itself adds to a call; none is a provider parameter.
_LANGCHAIN_KEYS = ("ls_structured_output_format", "run_name", "callbacks", "tags", "metadata")


class ChatRouter(BaseChatModel):
    """A LangChain chat model answered by a Router. `model`: `auto`, a backend or a consortium."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    router: Any
    model: str = "auto"
    max_tokens: int | None = None
    temperature: float | None = None
    deadline_s: float | None = None
    prefer: str | None = None
    max_cost_usd: float | None = None
    extra: dict[str, Any] | None = None

    @property
    def _llm_type(self) -> str:
        return "route"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, "deadline_s": self.deadline_s, "prefer": self.prefer}

    # -- calls --------------------------------------------------------------------------------

    def _options(self, stop: list[str] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        fixed = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature,
                 "deadline_s": self.deadline_s, "prefer": self.prefer, "max_cost_usd": self.max_cost_usd,
                 "extra": self.extra}
        per_call = {k: v for k, v in kwargs.items() if k not in _LANGCHAIN_KEYS}
        per_call["stop"] = stop
        return {k: v for k, v in merged_options(fixed, per_call).items() if v is not None}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        result = self.router.complete(_openai(messages), **self._options(stop, kwargs))
        return _chat_result(result)

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        result = await self.router.acomplete(_openai(messages), **self._options(stop, kwargs))
        return _chat_result(result)

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        chunks = self.router.stream(_openai(messages), **self._options(stop, kwargs))
        try:
            for chunk in chunks:
                out = _generation_chunk(chunk)
                if out is not None:
                    if run_manager and isinstance(chunk, TextChunk):
                        run_manager.on_llm_new_token(chunk.text, chunk=out)
                    yield out
        finally:
            chunks.close()  # a caller that stopped reading: the upstream call ends

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        route_stream = self.router.astream(_openai(messages), **self._options(stop, kwargs))
        decided = decision_facts(await route_stream.start())  # decided as a call is: on the fleet's latest state
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            async for chunk in chunks:
                # The RouteResult is set before the FinalChunk arrives: fallbacks and downgrades included.
                out = _generation_chunk(chunk, result_facts(route_stream.result) if route_stream.result else decided)
                if out is None:
                    continue
                if run_manager and isinstance(chunk, TextChunk):
                    await run_manager.on_llm_new_token(chunk.text, chunk=out)
                yield out

    # -- tools and structured output ---------------------------------------------------------

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], *,
                   tool_choice: str | dict[str, Any] | bool | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Tools in any form LangChain knows, sent as OpenAI tools. `tool_choice`: "auto",
        "none", "any"/"required"/True (some tool), or a tool's name."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        choice = _tool_choice(tool_choice, formatted)
        if choice is not None:
            kwargs["tool_choice"] = choice
        return super().bind(tools=formatted, **kwargs)

    def with_structured_output(self, schema: dict[str, Any] | type, *, include_raw: bool = False,
                               method: Literal["function_calling", "json_schema"] = "function_calling",
                               **kwargs: Any) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """`function_calling` (default): the model must call a tool shaped like `schema`;
        `json_schema`: the answer follows `schema` as `response_format` (the backend must honour it)."""
        if method == "function_calling":
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        if include_raw or kwargs:
            raise ValueError("with_structured_output(method='json_schema') takes no include_raw or other arguments")
        name = getattr(schema, "__name__", None) or str(schema.get("title", "output"))  # type: ignore[union-attr]
        response_format = {"type": "json_schema",
                           "json_schema": {"name": name, "schema": convert_to_json_schema(schema), "strict": True}}
        bound = self.bind(response_format=response_format)
        parser = (PydanticOutputParser(pydantic_object=schema)
                  if isinstance(schema, type) and issubclass(schema, BaseModel) else JsonOutputParser())
        return bound | parser


def _openai(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [dict(m) for m in convert_to_openai_messages(messages)]


def _tool_choice(choice: str | dict[str, Any] | bool | None, tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
    if choice is None or choice is False or isinstance(choice, dict):
        return choice or None
    if choice is True or choice in ("any", "required"):
        return "required"
    if choice in ("auto", "none"):
        return choice
    names = [t["function"]["name"] for t in tools]
    if choice not in names:
        raise ValueError(f"tool_choice {choice!r} names no bound tool; the tools are {', '.join(names)}")
    return {"type": "function", "function": {"name": choice}}


def _tool_calls(completion: Completion) -> list[dict[str, Any]]:
    calls = []
    for call in completion.tool_calls or ():
        function = call.get("function") or {}
        try:
            args = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {"__raw_arguments": function.get("arguments")}
        calls.append({"name": function.get("name") or "", "args": args, "id": call.get("id"), "type": "tool_call"})
    return calls


def _usage(completion: Completion) -> dict[str, int]:
    u = completion.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "total_tokens": u.total_tokens}


def _metadata(result: RouteResult) -> dict[str, Any]:
    c = result.completion
    return {"route": result_facts(result), "model_name": c.backend, "finish_reason": c.finish_reason,
            "model_provider": "route"}


def _chat_result(result: RouteResult) -> ChatResult:
    c = result.completion
    message = AIMessage(content=c.text, tool_calls=_tool_calls(c), response_metadata=_metadata(result),
                        usage_metadata=_usage(c))
    return ChatResult(generations=[ChatGeneration(message=message)])


def _generation_chunk(chunk: Any, facts: dict[str, Any] | None = None) -> ChatGenerationChunk | None:
    """One LangChain chunk for a router chunk (None for drafts and thinking); the last carries
    the decision (`facts`, else what the completion says) and the usage."""
    if isinstance(chunk, TextChunk):
        return ChatGenerationChunk(message=AIMessageChunk(content=chunk.text))
    if isinstance(chunk, ToolCallChunk):
        piece = tool_call_chunk(name=chunk.name, args=chunk.arguments, id=chunk.id, index=chunk.index)
        return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[piece]))
    if isinstance(chunk, FinalChunk):
        c = chunk.completion
        route = {"backend": c.backend, "model": c.model, "cost_usd": c.cost_usd, **(facts or {})}
        metadata = {"route": route, "model_name": c.backend, "finish_reason": c.finish_reason,
                    "model_provider": "route"}
        return ChatGenerationChunk(message=AIMessageChunk(content="", response_metadata=metadata,
                                                          usage_metadata=_usage(c)))
    return None
