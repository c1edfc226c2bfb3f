"""The router's answers in Gemini's shape: a GenerateContentResponse whole, a stream of them, an
error.

A response is one candidate whose `content` (role `model`) holds the answer's parts: thoughts
(`{"text", "thought": true}`, only when the request asked for them with
`thinkingConfig.includeThoughts`), text, and function calls (`{"functionCall": {"id", "name",
"args"}}`); `finishReason` in Gemini's words; `usageMetadata` counted as Gemini counts
(`candidatesTokenCount` leaves the thoughts out, `thoughtsTokenCount` has them;
`cachedContentTokenCount` is the part of the prompt the provider's cache served).

Signed thinking (Anthropic's, which Anthropic refuses a tool loop without) rides on the first
function call as its `thoughtSignature`, Gemini's own field for the model's sealed thinking, which
Gemini's clients send back with the call (encoded as reasoning.py encodes it for Responses, then
as base64, as Google's signatures are).

A stream (`streamGenerateContent`) is a sequence of such responses, each with the parts that
arrived since the last: as server-sent events (`?alt=sse`: `data: {...}`, what Gemini CLI and the
google-genai SDK ask for), or else one JSON array written as it grows. Gemini sends a function
call whole, never in pieces, so the pieces a backend streams are gathered and go out with the
last response, which carries `finishReason` and the usage. Errors are Google's:
`{"error": {"code", "message", "status"}}`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Any

import orjson

from backends.anthropic_format import tool_input
from backends.types import Completion, ToolCallChunk
from router.server.errors import ApiError
from router.server.protocols.base import Call, Facts
from router.server.protocols.reasoning import Sealer, blocks_from, encrypted_content, sealed_blocks

__all__ = ["STATUSES", "GeminiEvents", "error_body", "error_object", "finish_reason", "response_body", "signed_blocks",
           "thought_signature", "usage_metadata"]

# Google's canonical status for each HTTP status it answers with; others fall back by class.
STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            408: "DEADLINE_EXCEEDED", 409: "ABORTED", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
            499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE", 503: "UNAVAILABLE",
            504: "DEADLINE_EXCEEDED"}
# OpenAI finish reasons (what the router's completions carry) in Gemini's words. A turn that
# ends in function calls is STOP there.
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "function_call": "STOP", "length": "MAX_TOKENS",
           "content_filter": "SAFETY"}


def error_object(err: ApiError) -> dict[str, Any]:
    status = STATUSES.get(err.status) or ("INVALID_ARGUMENT" if err.status < 500 else "INTERNAL")
    return {"error": {"code": err.status, "message": err.message, "status": status}}


def error_body(err: ApiError) -> bytes:
    return orjson.dumps(error_object(err))


def finish_reason(completion: Completion | None) -> str:
    if completion is None or completion.finish_reason is None:
        return "STOP"
    return _FINISH.get(completion.finish_reason, "OTHER")


def usage_metadata(completion: Completion) -> dict[str, int]:
    u = completion.usage
    usage = {"promptTokenCount": u.input_tokens, "candidatesTokenCount": max(0, u.output_tokens - u.thinking_tokens),
             "totalTokenCount": u.total_tokens}
    if u.cache_read_tokens:
        usage["cachedContentTokenCount"] = u.cache_read_tokens
    if u.thinking_tokens:
        usage["thoughtsTokenCount"] = u.thinking_tokens
    return usage


def _function_call(call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": tool_input(arguments)}
    if call_id:
        call["id"] = call_id  # Gemini CLI sends it back with the function's response
    return {"functionCall": call}


def _candidate(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return candidate


def thought_signature(blocks: list[dict[str, Any]]) -> str:
    """Signed thinking blocks as a `thoughtSignature`: base64, as Google's are, since the
    google-genai SDK reads the field as base64 bytes (and writes them back the same)."""
    return base64.b64encode(encrypted_content(blocks).encode()).decode()


def signed_blocks(signature: str | None) -> list[dict[str, Any]]:
    """The blocks a `thoughtSignature` of ours holds; none for Google's own, or anything else."""
    if not signature:
        return []
    try:
        return blocks_from(base64.b64decode(signature, validate=True).decode())
    except (binascii.Error, UnicodeDecodeError):
        return []


def _calls(completion: Completion, sealed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer's function calls, the first carrying the provider's signed thinking as its
    `thoughtSignature`: Gemini's clients send that back with the call, so the thinking returns
    to the provider that refuses a tool loop without it (router/server/protocols/reasoning.py)."""
    calls = [_function_call(c.get("id"), c["function"]["name"], c["function"].get("arguments", ""))
             for c in completion.tool_calls or ()]
    if calls and sealed:
        calls[0]["thoughtSignature"] = thought_signature(sealed)
    return calls


def response_body(call: Call, completion: Completion, facts: Facts | None) -> bytes:
    """The whole GenerateContentResponse."""
    parts: list[dict[str, Any]] = []
    if completion.thinking and call.echo.get("include_thoughts"):
        parts.append({"text": completion.thinking, "thought": True})
    if completion.text:
        parts.append({"text": completion.text})
    parts += _calls(completion, sealed_blocks(completion))
    body: dict[str, Any] = {"candidates": [_candidate(parts or [{"text": ""}], finish_reason(completion))],
                            "usageMetadata": usage_metadata(completion), "modelVersion": call.model,
                            "responseId": _response_id()}
    if facts:
        body["route"] = facts  # an extension field; Gemini's clients ignore it
    return orjson.dumps(body)


def _response_id() -> str:
    return uuid.uuid4().hex[:22]


class GeminiEvents:
    """One stream's responses. `sse`: server-sent events; else the elements of one JSON array."""

    def __init__(self, call: Call, sse: bool):
        self._model = call.model
        self._id = _response_id()
        self._thoughts = bool(call.echo.get("include_thoughts"))
        self._sse = sse
        self._sent = 0  # responses written (the array's commas)
        self._calls: dict[int, list[str]] = {}  # index -> [id, name, arguments so far]
        self._sealer = Sealer()
        self._sealed: list[dict[str, Any]] = []  # the signed thinking blocks so far
        self.headers = None if sse else [(b"content-type", b"application/json")]

    def _write(self, response: dict[str, Any]) -> bytes:
        data = orjson.dumps(response)
        self._sent += 1
        if self._sse:
            return b"data: " + data + b"\r\n\r\n"
        return (b"," if self._sent > 1 else b"") + data + b"\n"

    def _parts(self, parts: list[dict[str, Any]]) -> bytes:
        return self._write({"candidates": [_candidate(parts)], "modelVersion": self._model, "responseId": self._id})

    def start(self) -> bytes:
        return b"" if self._sse else b"["

    def text(self, text: str) -> bytes:
        return self._parts([{"text": text}]) if text else b""

    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes:
        self._sealed += self._sealer.feed(text, signature, redacted)  # for the first call's thoughtSignature
        return self._parts([{"text": text, "thought": True}]) if text and self._thoughts else b""

    def draft(self, text: str) -> bytes:
        return b""

    def tool_call(self, piece: ToolCallChunk) -> bytes:
        held = self._calls.setdefault(piece.index, [piece.id or "", piece.name or "", ""])
        held[0] = held[0] or piece.id or ""
        held[1] = held[1] or piece.name or ""
        held[2] += piece.arguments or ""
        return b""

    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes:
        if completion is not None:  # it holds every call whole, those that streamed too
            calls = _calls(completion, sealed_blocks(completion) or self._sealed)
        else:
            calls = [_function_call(*self._calls[i]) for i in sorted(self._calls)]
        last: dict[str, Any] = {"candidates": [_candidate(calls or [{"text": ""}], finish_reason(completion))],
                                "modelVersion": self._model, "responseId": self._id}
        if completion is not None:
            last["usageMetadata"] = usage_metadata(completion)
        if facts:
            last["route"] = facts
        return self._write(last) + (b"" if self._sse else b"]")

    def error(self, err: ApiError) -> bytes:
        return self._write(error_object(err)) + (b"" if self._sse else b"]")
