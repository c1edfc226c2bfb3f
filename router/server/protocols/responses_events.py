"""Answers in the OpenAI Responses API's shape: the response object, and a stream's numbered
events. Output items come in the order the model produced them: its reasoning (a `reasoning`
item whose content is `reasoning_text`, as the API gives open models' raw reasoning), its
message, then one `function_call` item per tool call.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import orjson

from backends.types import Completion, ToolCallChunk
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts

__all__ = ["ResponseEvents", "finished"]

Status = Literal["in_progress", "completed", "incomplete", "failed"]


class _Ids:
    """The ids one answer's items carry, the same in its events and in its final object."""

    def __init__(self) -> None:
        self.response = f"resp_{uuid.uuid4().hex}"
        self.reasoning = f"rs_{uuid.uuid4().hex}"
        self.message = f"msg_{uuid.uuid4().hex}"
        self.created = int(time.time())

    @staticmethod
    def call(call: dict[str, Any]) -> tuple[str, str]:
        call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
        return f"fc_{call_id.removeprefix('call_')}", call_id


def _reasoning_item(ids: _Ids, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
    return {"type": "reasoning", "id": ids.reasoning, "status": status, "summary": [], "content": content}


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
    return {"input_tokens": u.input_tokens, "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
            "output_tokens": u.output_tokens, "output_tokens_details": {"reasoning_tokens": u.thinking_tokens},
            "total_tokens": u.total_tokens}


def _envelope(call: Call, ids: _Ids, status: Status, output: list[dict[str, Any]],
              usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": ids.response, "object": "response", "created_at": ids.created, "status": status, "model": call.model,
            "output": output, "usage": usage, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": call.echo.get("instructions"), "max_output_tokens": call.max_tokens,
            "metadata": call.extra.get("metadata") or {},
            "parallel_tool_calls": call.extra.get("parallel_tool_calls", True), "previous_response_id": None,
            "prompt_cache_key": call.extra.get("prompt_cache_key"),
            "reasoning": {"effort": call.extra.get("reasoning_effort"), "summary": None},
            "temperature": call.temperature, "top_p": call.extra.get("top_p"),
            "tool_choice": call.echo.get("tool_choice") or "auto", "tools": call.echo.get("tools") or [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": False}


def _status(completion: Completion) -> Literal["completed", "incomplete"]:
    return "incomplete" if completion.finish_reason == "length" else "completed"


def finished(call: Call, completion: Completion, ids: _Ids | None = None) -> dict[str, Any]:
    """The response object of a whole answer."""
    ids = ids or _Ids()
    output = [_reasoning_item(ids, completion.thinking)] if completion.thinking else []
    output += [_message_item(ids, completion.text)] if completion.text else []
    output += _call_items(ids, completion, call.echo["namespaces"])
    return _envelope(call, ids, _status(completion), output, _usage(completion))


class ResponseEvents:
    """One stream's events, numbered. Reasoning, text and tool calls go out as they come; a tool
    call the backend did not stream arrives whole with the final completion, an item whose
    arguments come in one delta."""

    def __init__(self, call: Call):
        self.call, self.ids = call, _Ids()
        self.seq = 0
        self.items = 0  # output items opened so far
        self._open: Literal["reasoning", "message"] | None = None
        self._parts: list[str] = []  # text of the open item
        self._said = {"reasoning": "", "message": ""}  # each item's text, once closed
        self._calls: dict[int, dict[str, Any]] = {}  # tool calls streamed: index -> their item, arguments so far

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(
            {"type": kind, "sequence_number": self.seq - 1, **data}) + b"\n\n"

    def start(self) -> bytes:
        response = _envelope(self.call, self.ids, "in_progress", [], None)
        return self._event("response.created", response=response) + self._event("response.in_progress",
                                                                                 response=response)

    def _where(self) -> dict[str, Any]:
        item = self.ids.reasoning if self._open == "reasoning" else self.ids.message
        return {"item_id": item, "output_index": self.items - 1, "content_index": 0}

    def _piece(self, kind: Literal["reasoning", "message"], text: str) -> bytes:
        out = []
        if self._open != kind:
            out += self._close()
            self._open, self.items = kind, self.items + 1
            item = (_reasoning_item if kind == "reasoning" else _message_item)(self.ids, "", "in_progress")
            part = {"type": "reasoning_text", "text": ""} if kind == "reasoning" else \
                {"type": "output_text", "text": "", "annotations": []}
            out += [self._event("response.output_item.added", output_index=self.items - 1, item=item),
                    self._event("response.content_part.added", **self._where(), part=part)]
        self._parts.append(text)
        if kind == "reasoning":
            out.append(self._event("response.reasoning_text.delta", **self._where(), delta=text))
        else:
            out.append(self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[]))
        return b"".join(out)

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        text, where, kind = "".join(self._parts), self._where(), self._open
        self._said[kind], self._open, self._parts = text, None, []
        if kind == "reasoning":
            part: dict[str, Any] = {"type": "reasoning_text", "text": text}
            done = [self._event("response.reasoning_text.done", **where, text=text)]
            item = _reasoning_item(self.ids, text)
        else:
            part = {"type": "output_text", "text": text, "annotations": []}
            done = [self._event("response.output_text.done", **where, text=text, logprobs=[])]
            item = _message_item(self.ids, text)
        return [*done, self._event("response.content_part.done", **where, part=part),
                self._event("response.output_item.done", output_index=where["output_index"], item=item)]

    def text(self, text: str) -> bytes:
        return self._piece("message", text)

    def thinking(self, text: str, signature: str | None = None) -> bytes:
        return self._piece("reasoning", text) if text else b""

    def draft(self, text: str) -> bytes:
        return b""

    def tool_call(self, piece: ToolCallChunk) -> bytes:
        out = []
        streamed = self._calls.get(piece.index)
        if streamed is None:
            out += self._close()
            call = {"id": piece.id, "function": {"name": piece.name or "", "arguments": ""}}
            item = _call_items(self.ids, Completion(text="", backend="", model="", tool_calls=[call]),
                               self.call.echo["namespaces"])[0]
            streamed = self._calls[piece.index] = {"item": item, "output_index": self.items, "arguments": ""}
            self.items += 1
            out.append(self._event("response.output_item.added", output_index=streamed["output_index"],
                                   item={**item, "status": "in_progress"}))
        if piece.arguments:
            streamed["arguments"] += piece.arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=streamed["item"]["id"],
                                   output_index=streamed["output_index"], delta=piece.arguments))
        return b"".join(out)

    def _end_streamed_calls(self, completion: Completion) -> list[bytes]:
        out = []
        for index, streamed in self._calls.items():
            calls = completion.tool_calls or []
            arguments = calls[index]["function"].get("arguments") or "" if index < len(calls) else streamed["arguments"]
            item = {**streamed["item"], "arguments": arguments}
            where = {"item_id": item["id"], "output_index": streamed["output_index"]}
            out += [self._event("response.function_call_arguments.done", **where, name=item["name"], arguments=arguments),
                    self._event("response.output_item.done", output_index=streamed["output_index"], item=item)]
        return out

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        out = self._close()
        if completion is None:
            completion = Completion(text=self._said["message"], backend="", model="",
                                    thinking=self._said["reasoning"] or None)
        out += self._end_streamed_calls(completion)
        for position, item in enumerate(_call_items(self.ids, completion, self.call.echo["namespaces"])):
            if position in self._calls:
                continue
            index, self.items = self.items, self.items + 1
            where = {"item_id": item["id"], "output_index": index}
            out += [self._event("response.output_item.added", output_index=index,
                                item={**item, "arguments": "", "status": "in_progress"}),
                    self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
                    self._event("response.function_call_arguments.done", **where, name=item["name"],
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=index, item=item)]
        response = finished(self.call, completion, self.ids)
        out.append(self._event("response.completed" if response["status"] == "completed" else "response.incomplete",
                               response=response))
        return b"".join(out)

    def error(self, err: ApiError) -> bytes:
        response = _envelope(self.call, self.ids, "failed", [], None)
        response["error"] = {"code": err.code or "server_error", "message": err.message}
        return self._event("response.failed", response=response)
