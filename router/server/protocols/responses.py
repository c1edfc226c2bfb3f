"""The OpenAI Responses API (`POST /v1/responses`), the subset agents use, as a dialect:
translated to and from the router's chat-format call; the request is checked against
responses_schema.py. Stateless: nothing is stored, so a request must carry its whole
conversation.

Supported: `input` as text or a list of message, `function_call` and `function_call_output`
items (reasoning items an earlier answer carried are dropped); `instructions`; function tools and
`tool_choice`; `max_output_tokens`, `temperature`, `top_p`; `text.format` (JSON mode and schema);
streaming (`response.created`, `response.output_text.delta`, `response.function_call_arguments.
delta`, `response.completed`, ...); usage. Function tools grouped in `namespace` tools (Codex)
are flattened, and their calls name the namespace back. Built-in tools (web search, file
search, computer use...) are left out, since no model behind the router can run them and agents
send them unasked. Refused with a 400 that names the field: `previous_response_id`,
`conversation`, `background`, `prompt`, and item references. Errors are OpenAI-shaped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import orjson

from backends.types import Completion, Message
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts
from router.server.protocols.responses_schema import RESPONSES_REQUEST, ResponsesRequest
from router.server.protocols.validation import bad_request, decode, validated

__all__ = ["ResponsesDialect"]

_STATEFUL = {
    "previous_response_id": "this router keeps no responses; send the whole conversation in `input`",
    "conversation": "this router keeps no conversations; send the whole conversation in `input`",
    "prompt": "stored prompt templates are not available here; send `instructions` and `input`",
}


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


def _append_call(out: list[Message], item: dict[str, Any]) -> None:
    call = {"id": item.get("call_id"), "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}}
    last = out[-1] if out else None
    if last is not None and last["role"] == "assistant":  # parallel calls: one assistant turn
        last.setdefault("tool_calls", []).append(call)
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(str(p.get("text", "")) for p in output or () if isinstance(p, dict))


def _item(out: list[Message], item: dict[str, Any]) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        role = "system" if item.get("role") == "developer" else item.get("role")
        if role not in ("user", "assistant", "system"):
            raise _bad(f"input message role {item.get('role')!r} is unknown", "input")
        out.append({"role": role, "content": _content(item.get("content"))})
    elif kind == "function_call":
        _append_call(out, item)
    elif kind == "function_call_output":
        out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _output_text(item.get("output"))})
    elif kind != "reasoning":
        raise _bad(f"input item type {kind!r} is not supported (stateless router: no item references, no "
                   "built-in tool results); send message, function_call and function_call_output items", "input")


def _messages(request: ResponsesRequest, body: dict[str, Any]) -> list[Message]:
    out: list[Message] = [{"role": "system", "content": request.instructions}] if request.instructions else []
    if isinstance(body["input"], str):
        out.append({"role": "user", "content": body["input"]})
    else:
        for item in body["input"]:
            _item(out, item)
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
    if request.top_p is not None:
        extra["top_p"] = request.top_p
    return extra


# -- answers ------------------------------------------------------------------------------------


class _Ids:
    """The ids one answer's items carry, the same in its events and in its final object."""

    def __init__(self) -> None:
        self.response = f"resp_{uuid.uuid4().hex}"
        self.message = f"msg_{uuid.uuid4().hex}"
        self.created = int(time.time())

    @staticmethod
    def call(call: dict[str, Any]) -> tuple[str, str]:
        call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
        return f"fc_{call_id.removeprefix('call_')}", call_id


def _message_item(ids: _Ids, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": ids.message, "status": status, "role": "assistant", "content": content}


def _call_items(ids: _Ids, completion: Completion, namespaces: dict[str, str]) -> list[dict[str, Any]]:
    items = []
    for call in completion.tool_calls or ():
        item_id, call_id = ids.call(call)
        name = call["function"]["name"]
        item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
                "arguments": call["function"].get("arguments") or "", "status": "completed"}
        if name in namespaces:
            item["namespace"] = namespaces[name]
        items.append(item)
    return items


def _usage(completion: Completion) -> dict[str, Any]:
    u = completion.usage
    return {"input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.total_tokens}


def _envelope(call: Call, ids: _Ids, status: Literal["in_progress", "completed", "incomplete", "failed"],
              output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": ids.response, "object": "response", "created_at": ids.created, "status": status, "model": call.model,
            "output": output, "usage": usage, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": call.echo.get("instructions"), "max_output_tokens": call.max_tokens, "metadata": {},
            "parallel_tool_calls": call.extra.get("parallel_tool_calls", True), "previous_response_id": None,
            "temperature": call.temperature, "top_p": call.extra.get("top_p"),
            "tool_choice": call.echo.get("tool_choice") or "auto", "tools": call.echo.get("tools") or [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": False}


def _finished(call: Call, ids: _Ids, completion: Completion) -> dict[str, Any]:
    output = [_message_item(ids, completion.text)] if completion.text else []
    output += _call_items(ids, completion, call.echo["namespaces"])
    status: Literal["completed", "incomplete"] = "incomplete" if completion.finish_reason == "length" else "completed"
    return _envelope(call, ids, status, output, _usage(completion))


class _Events:
    """One stream's events, numbered. Text goes out as it comes; tool calls arrive whole with the
    final completion, so each is an item whose arguments come in one delta."""

    def __init__(self, call: Call):
        self.call, self.ids = call, _Ids()
        self.seq = 0
        self.text_parts: list[str] = []

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(
            {"type": kind, "sequence_number": self.seq - 1, **data}) + b"\n\n"

    def start(self) -> bytes:
        response = _envelope(self.call, self.ids, "in_progress", [], None)
        return self._event("response.created", response=response) + self._event("response.in_progress",
                                                                                 response=response)

    def text(self, text: str) -> bytes:
        head = b""
        where = {"item_id": self.ids.message, "output_index": 0, "content_index": 0}
        if not self.text_parts:
            head = (self._event("response.output_item.added", output_index=0,
                                item=_message_item(self.ids, "", "in_progress"))
                    + self._event("response.content_part.added", **where,
                                  part={"type": "output_text", "text": "", "annotations": []}))
        self.text_parts.append(text)
        return head + self._event("response.output_text.delta", **where, delta=text, logprobs=[])

    def _close_text(self) -> list[bytes]:
        if not self.text_parts:
            return []
        text = "".join(self.text_parts)
        where = {"item_id": self.ids.message, "output_index": 0, "content_index": 0}
        return [self._event("response.output_text.done", **where, text=text, logprobs=[]),
                self._event("response.content_part.done", **where,
                            part={"type": "output_text", "text": text, "annotations": []}),
                self._event("response.output_item.done", output_index=0, item=_message_item(self.ids, text))]

    def thinking(self, text: str) -> bytes:
        return b""

    def draft(self, text: str) -> bytes:
        return b""

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        out = self._close_text()
        if completion is None:
            completion = Completion(text="".join(self.text_parts), backend="", model="")
        first = 1 if self.text_parts else 0
        for index, item in enumerate(_call_items(self.ids, completion, self.call.echo["namespaces"]), start=first):
            where = {"item_id": item["id"], "output_index": index}
            out += [self._event("response.output_item.added", output_index=index,
                                item={**item, "arguments": "", "status": "in_progress"}),
                    self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
                    self._event("response.function_call_arguments.done", **where, name=item["name"],
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=index, item=item)]
        response = _finished(self.call, self.ids, completion)
        out.append(self._event("response.completed" if response["status"] == "completed" else "response.incomplete",
                               response=response))
        return b"".join(out)

    def error(self, err: ApiError) -> bytes:
        response = _envelope(self.call, self.ids, "failed", [], None)
        response["error"] = {"code": err.code or "server_error", "message": err.message}
        return self._event("response.failed", response=response)


class ResponsesDialect:
    """`POST /v1/responses`."""

    def parse(self, raw: bytes) -> Call:
        request, body = _parse(raw)
        tools, namespaces = _tools(body.get("tools"))
        echo = {"instructions": request.instructions, "tools": body.get("tools"), "tool_choice": body.get("tool_choice"),
                "namespaces": namespaces}
        return Call(model=request.model, messages=_messages(request, body), stream=request.stream,
                    max_tokens=request.max_output_tokens, temperature=request.temperature,
                    extra=_extra(request, body, tools), echo=echo)

    def error_body(self, err: ApiError) -> bytes:
        return err.body()

    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes:
        return orjson.dumps(_finished(call, _Ids(), completion))

    def writer(self, call: Call) -> _Events:
        return _Events(call)
