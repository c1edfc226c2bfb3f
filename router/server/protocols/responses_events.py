"""Answers in the OpenAI Responses API's shape: the response object, and a stream's numbered
events. Output items come in the order the model produced them: its reasoning, its message,
then one `function_call` item per tool call.

A `reasoning` item's content is `reasoning_text`, as the API gives open models' raw reasoning;
when the request asked for a summary (`reasoning.summary`, as Codex does), the same text is its
`summary` too (`summary_text`, what Codex shows: a provider's thinking is already written to be
read); when it asked for `include: ["reasoning.encrypted_content"]`, the signed thinking rides
in `encrypted_content` (router/server/protocols/reasoning.py).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import orjson

from backends.types import Completion, ToolCallChunk
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts
from router.server.protocols.reasoning import ENCRYPTED_CONTENT, Sealer, encrypted_content, sealed_blocks

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


def _summarized(call: Call) -> bool:
    return call.echo.get("summary") not in (None, "none")


def _reasoning_item(call: Call, item_id: str, text: str, blocks: list[dict[str, Any]],
                    status: str = "completed") -> dict[str, Any]:
    done = status == "completed" and bool(text)
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "status": status,
                            "summary": [{"type": "summary_text", "text": text}] if done and _summarized(call) else [],
                            "content": [{"type": "reasoning_text", "text": text}] if done else []}
    if status == "completed" and blocks and ENCRYPTED_CONTENT in call.echo.get("include", ()):
        item["encrypted_content"] = encrypted_content(blocks)
    return item


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
            "reasoning": {"effort": call.extra.get("reasoning_effort"), "summary": call.echo.get("summary")},
            "temperature": call.temperature, "top_p": call.extra.get("top_p"),
            "tool_choice": call.echo.get("tool_choice") or "auto", "tools": call.echo.get("tools") or [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": False}


def _status(completion: Completion) -> Literal["completed", "incomplete"]:
    return "incomplete" if completion.finish_reason == "length" else "completed"


def finished(call: Call, completion: Completion, ids: _Ids | None = None) -> dict[str, Any]:
    """The response object of a whole answer."""
    ids = ids or _Ids()
    sealed = sealed_blocks(completion)
    output = [_reasoning_item(call, ids.reasoning, completion.thinking or "", sealed)] \
        if completion.thinking or sealed else []
    output += [_message_item(ids, completion.text)] if completion.text else []
    output += _call_items(ids, completion, call.echo["namespaces"])
    return _envelope(call, ids, _status(completion), output, _usage(completion))


class ResponseEvents:
    """One stream's events, numbered. Reasoning, text and tool calls go out as they come; a tool
    call the backend did not stream arrives whole with the final completion, an item whose
    arguments come in one delta. The final response lists the items as they were streamed."""

    def __init__(self, call: Call):
        self.call, self.ids = call, _Ids()
        self.seq = 0
        self.items = 0  # output items opened so far
        self._open: Literal["reasoning", "message"] | None = None
        self._parts: list[str] = []  # text of the open item
        self._sealer = Sealer()
        self._sealed: list[dict[str, Any]] = []  # signed thinking of the open reasoning item
        self._reasoned = 0  # reasoning items opened so far: each after the first gets an id of its own
        self._done: dict[int, dict[str, Any]] = {}  # output index -> the item as it was finished
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

    def _summary_where(self) -> dict[str, Any]:
        return {"item_id": self.ids.reasoning, "output_index": self.items - 1, "summary_index": 0}

    def _opening(self, kind: Literal["reasoning", "message"]) -> list[bytes]:
        if self._open == kind:
            return []
        out = self._close()
        self._open, self.items = kind, self.items + 1
        if kind == "message":
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
            item = _message_item(self.ids, "", "in_progress")
        else:
            self._reasoned += 1
            if self._reasoned > 1:
                self.ids.reasoning = f"rs_{uuid.uuid4().hex}"
            part = {"type": "reasoning_text", "text": ""}
            item = _reasoning_item(self.call, self.ids.reasoning, "", [], "in_progress")
        out += [self._event("response.output_item.added", output_index=self.items - 1, item=item),
                self._event("response.content_part.added", **self._where(), part=part)]
        if kind == "reasoning" and _summarized(self.call):
            out.append(self._event("response.reasoning_summary_part.added", **self._summary_where(),
                                   part={"type": "summary_text", "text": ""}))
        return out

    def _piece(self, kind: Literal["reasoning", "message"], text: str) -> bytes:
        out = self._opening(kind)
        self._parts.append(text)
        if kind == "message":
            out.append(self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[]))
            return b"".join(out)
        out.append(self._event("response.reasoning_text.delta", **self._where(), delta=text))
        if _summarized(self.call):
            out.append(self._event("response.reasoning_summary_text.delta", **self._summary_where(), delta=text))
        return b"".join(out)

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        text, where, kind = "".join(self._parts), self._where(), self._open
        self._open, self._parts = None, []
        if kind == "message":
            item = _message_item(self.ids, text)
            part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
            done = [self._event("response.output_text.done", **where, text=text, logprobs=[])]
        else:
            item = _reasoning_item(self.call, self.ids.reasoning, text, self._sealed)
            self._sealed = []
            part = {"type": "reasoning_text", "text": text}
            done = [self._event("response.reasoning_text.done", **where, text=text)]
            if _summarized(self.call):
                summary = self._summary_where()
                done += [self._event("response.reasoning_summary_text.done", **summary, text=text),
                         self._event("response.reasoning_summary_part.done", **summary,
                                     part={"type": "summary_text", "text": text})]
        self._done[where["output_index"]] = item
        return [*done, self._event("response.content_part.done", **where, part=part),
                self._event("response.output_item.done", output_index=where["output_index"], item=item)]

    def text(self, text: str) -> bytes:
        return self._piece("message", text)

    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes:
        out = self._piece("reasoning", text) if text else b""
        sealed = self._sealer.feed(text, signature, redacted)
        if sealed:
            out += b"".join(self._opening("reasoning"))  # a redacted block may be the first thinking
            self._sealed += sealed
        return out

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

    def _end_streamed_calls(self, completion: Completion | None) -> list[bytes]:
        out = []
        for index, streamed in self._calls.items():
            calls = completion.tool_calls or [] if completion is not None else []
            arguments = calls[index]["function"].get("arguments") or "" if index < len(calls) else streamed["arguments"]
            item = {**streamed["item"], "arguments": arguments}
            where = {"item_id": item["id"], "output_index": streamed["output_index"]}
            self._done[streamed["output_index"]] = item
            out += [self._event("response.function_call_arguments.done", **where, name=item["name"], arguments=arguments),
                    self._event("response.output_item.done", output_index=streamed["output_index"], item=item)]
        return out

    def _whole_calls(self, completion: Completion) -> list[bytes]:
        out = []
        for position, item in enumerate(_call_items(self.ids, completion, self.call.echo["namespaces"])):
            if position in self._calls:
                continue
            index, self.items = self.items, self.items + 1
            where = {"item_id": item["id"], "output_index": index}
            self._done[index] = item
            out += [self._event("response.output_item.added", output_index=index,
                                item={**item, "arguments": "", "status": "in_progress"}),
                    self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
                    self._event("response.function_call_arguments.done", **where, name=item["name"],
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=index, item=item)]
        return out

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        out = [*self._close(), *self._end_streamed_calls(completion)]
        if completion is not None:
            out += self._whole_calls(completion)
        output = [self._done[index] for index in sorted(self._done)]
        completion = completion or Completion(text="", backend="", model="")
        response = _envelope(self.call, self.ids, _status(completion), output, _usage(completion))
        out.append(self._event("response.completed" if response["status"] == "completed" else "response.incomplete",
                               response=response))
        return b"".join(out)

    def error(self, err: ApiError) -> bytes:
        response = _envelope(self.call, self.ids, "failed", [], None)
        response["error"] = {"code": err.code or "server_error", "message": err.message}
        return self._event("response.failed", response=response)
