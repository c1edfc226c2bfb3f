"""The OpenAI Responses API (`POST /v1/responses`), the subset agents use, as a dialect:
translated to and from the router's chat-format call; the request is checked against
responses_schema.py. Stateless: nothing is stored, so a request must carry its whole
conversation.

Supported: `input` as text or a list of message, `function_call` and `function_call_output`
items, and reasoning items an earlier answer carried (their `encrypted_content`, when route wrote
it, is the signed thinking the next assistant turn goes back to its provider with; any other
reasoning is dropped: router/server/protocols/reasoning.py); `instructions`; function tools and
`tool_choice`; `max_output_tokens` (sent as chat's `max_completion_tokens`), `temperature`, `top_p`,
`seed`; `text.format` (JSON mode and schema) and `text.verbosity`; `reasoning.effort` (as chat's
`reasoning_effort`) and `reasoning.summary` (the reasoning item's summary);
`include: ["reasoning.encrypted_content"]`;
`prompt_cache_key`, `metadata`, `user`, `service_tier` (sent on); streaming and the answer's
items (responses_events.py); usage with cached and reasoning tokens. Function tools grouped in `namespace` tools (Codex)
are flattened, and their calls name the namespace back. Built-in tools (web search, file
search, computer use...) are left out, since no model behind the router can run them and agents
send them unasked. Refused with a 400 that names the field: `previous_response_id`,
`conversation`, `background`, `prompt`, and item references. Errors are OpenAI-shaped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from backends.types import Completion, Message
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts, bad_request, decode, route_options, session_field, validated
from router.server.protocols.reasoning import blocks_from
from router.server.protocols.responses_events import ResponseEvents, finished
from router.server.protocols.responses_schema import RESPONSES_REQUEST, ResponsesRequest

__all__ = ["ResponsesDialect"]

_STATEFUL = {
    "previous_response_id": "this router keeps no responses; send the whole conversation in `input`",
    "conversation": "this router keeps no conversations; send the whole conversation in `input`",
    "prompt": "stored prompt templates are not available here; send `instructions` and `input`",
}


# Fields with the same name and meaning in chat completions: sent on as they are.
_SENT_ON = ("top_p", "seed", "prompt_cache_key", "prompt_cache_retention", "metadata", "user", "safety_identifier",
            "service_tier", "store")


def _bad(message: str, param: str | None = None) -> ApiError:
    return bad_request(message, param, "unsupported_parameter" if param else "invalid_request")


def _parse(raw: bytes) -> tuple[ResponsesRequest, dict[str, Any]]:
    body = decode(raw, "a Responses object with `model` and `input`")
    request = validated(RESPONSES_REQUEST, body, "the OpenAI Responses API reference")
    for name, why in _STATEFUL.items():
        if getattr(request, name) is not None:
            raise _bad(f"`{name}` is not supported: {why}", name)
    if request.background:
        raise _bad("`background: true` is not supported: answers are not stored to fetch later; stream instead",
                   "background")
    return request, body


# -- requests -----------------------------------------------------------------------------------


def _part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "refusal"):
        return {"type": "text", "text": part.get("text") or part.get("refusal") or ""}
    if kind == "input_image" and part.get("image_url"):
        return {"type": "image_url", "image_url": {"url": part["image_url"]}}
    raise _bad(f"input content part {kind!r} is not supported; send input_text or input_image (by URL)", "input")


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts = [_part(p) for p in content or ()]
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


class _Turns:
    """Input items as chat messages. The signed thinking a reasoning item carries (its
    `encrypted_content`: router/server/protocols/reasoning.py) goes on the assistant turn that
    follows it, as that turn's `thinking_blocks`."""

    def __init__(self, out: list[Message]):
        self.out = out
        self._thinking: list[dict[str, Any]] = []  # blocks waiting for their assistant turn

    def reasoning(self, item: dict[str, Any]) -> None:
        self._thinking += blocks_from(item.get("encrypted_content"))

    def message(self, message: Message) -> None:
        self.out.append(self._with_thinking(message) if message["role"] == "assistant" else message)

    def call(self, item: dict[str, Any]) -> None:
        call = {"id": item.get("call_id"), "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}}
        last = self.out[-1] if self.out else None
        if last is not None and last["role"] == "assistant" and not self._thinking:
            last.setdefault("tool_calls", []).append(call)  # parallel calls, or calls after text: one turn
        else:
            self.out.append(self._with_thinking({"role": "assistant", "content": None, "tool_calls": [call]}))

    def _with_thinking(self, message: Message) -> Message:
        if self._thinking:
            message["thinking_blocks"], self._thinking = self._thinking, []
        return message


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(str(p.get("text", "")) for p in output or () if isinstance(p, dict))


def _item(turns: _Turns, item: dict[str, Any]) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        role = "system" if item.get("role") == "developer" else item.get("role")
        if role not in ("user", "assistant", "system"):
            raise _bad(f"input message role {item.get('role')!r} is unknown", "input")
        turns.message({"role": role, "content": _content(item.get("content"))})
    elif kind == "function_call":
        turns.call(item)
    elif kind == "function_call_output":
        turns.message({"role": "tool", "tool_call_id": item.get("call_id"), "content": _output_text(item.get("output"))})
    elif kind == "reasoning":
        turns.reasoning(item)
    else:
        raise _bad(f"input item type {kind!r} is not supported (stateless router: no item references, no "
                   "built-in tool results); send message, function_call and function_call_output items", "input")


def _messages(request: ResponsesRequest, body: dict[str, Any]) -> list[Message]:
    out: list[Message] = [{"role": "system", "content": request.instructions}] if request.instructions else []
    if isinstance(body["input"], str):
        out.append({"role": "user", "content": body["input"]})
    else:
        turns = _Turns(out)
        for item in body["input"]:
            _item(turns, item)
    if not out:
        raise _bad("`input` is empty; send text or at least one message", "input")
    return out


def _functions(tools: list[dict[str, Any]], namespace: str | None = None) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Function tools with the namespace each came in (Codex groups some tools in `namespace`
    tools); built-in tools (web search, file search, computer use...) are left out: only a
    hosted OpenAI model could run them, and agents send them whether or not they are needed."""
    for tool in tools:
        if tool.get("type") == "function":
            yield tool, namespace
        elif tool.get("type") == "namespace":
            yield from _functions(tool.get("tools") or [], tool.get("name"))


def _tools(tools: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]] | None, dict[str, str]]:
    """Chat tools, and the namespace of each namespaced function (its calls name it back)."""
    chat_tools, namespaces = [], {}
    for tool, namespace in _functions(tools or []):
        function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
        chat_tools.append({"type": "function", "function": function})
        if namespace:
            namespaces[str(tool.get("name"))] = namespace
    return chat_tools or None, namespaces


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if choice is None or isinstance(choice, str):
        return choice
    raise _bad(f"tool_choice {choice!r} is not supported; use auto, none, required or a function", "tool_choice")


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    fmt = (text or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": schema}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def _extra(request: ResponsesRequest, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = tools
        for key, value in (("tool_choice", _tool_choice(body.get("tool_choice"))),
                           ("parallel_tool_calls", request.parallel_tool_calls)):
            if value is not None:
                extra[key] = value
    response_format = _response_format(body.get("text"))
    if response_format:
        extra["response_format"] = response_format
    if request.reasoning is not None and request.reasoning.effort is not None:
        extra["reasoning_effort"] = request.reasoning.effort
    if request.text is not None and request.text.verbosity is not None:
        extra["verbosity"] = request.text.verbosity
    if request.max_output_tokens is not None:
        # Chat's name for the same limit (reasoning included), as a chat client that wrote it keeps
        # it: OpenAI's reasoning models refuse `max_tokens`, which chat completions deprecated.
        extra["max_completion_tokens"] = request.max_output_tokens
    for key in _SENT_ON:
        if body.get(key) is not None:
            extra[key] = body[key]
    return extra


class ResponsesDialect:
    """`POST /v1/responses`."""

    protocol = "openai responses"

    def parse(self, raw: bytes) -> Call:
        request, body = _parse(raw)
        if body.get("stream_options") is not None and not request.stream:
            raise _bad("`stream_options` is only allowed with `stream: true`; drop it, or stream", "stream_options")
        tools, namespaces = _tools(body.get("tools"))
        summary = request.reasoning.summary if request.reasoning is not None else None
        echo = {"instructions": request.instructions, "tools": body.get("tools"), "tool_choice": body.get("tool_choice"),
                "namespaces": namespaces, "summary": summary, "include": request.include or []}
        return Call(model=request.model, messages=_messages(request, body), stream=request.stream,
                    max_tokens=request.max_output_tokens, temperature=request.temperature,
                    extra=_extra(request, body, tools), echo=echo, session=session_field(body, request.prompt_cache_key),
                    route=route_options(body))

    def error_body(self, err: ApiError) -> bytes:
        return err.body()

    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes:
        return orjson.dumps(finished(call, completion))

    def writer(self, call: Call) -> ResponseEvents:
        return ResponseEvents(call)
