"""Gemma 4's tool-call protocol (which DiffusionGemma speaks) to OpenAI tool calls.

The model writes, after any visible text:

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,metric:true,hours:[9,12]}<tool_call|>

Keys are bare identifiers; strings sit between `<|"|>` quote tokens; numbers, booleans and null
are bare; objects and arrays nest with the same rules. `extract_tool_calls` returns the text with
every well-formed call removed and the calls in OpenAI's shape (`arguments` a JSON string). A call
that does not parse stays in the text, so nothing the model wrote is silently dropped.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any

from backends.thinking import partial_suffix
from backends.types import Chunk, Completion, FinalChunk, TextChunk, ToolCallChunk

__all__ = ["CALL_CLOSE", "CALL_OPEN", "ToolCallSyntaxError", "extract_tool_calls", "parse_call", "tool_call_chunks",
           "with_tool_calls"]

CALL_OPEN = "<|tool_call>"
CALL_CLOSE = "<tool_call|>"
QUOTE = '<|"|>'
_PREFIX = "call:"


class ToolCallSyntaxError(ValueError):
    """The text between the tool-call markers is not `call:NAME{...}`."""


class _Reader:
    """A recursive-descent reader over one call's body."""

    def __init__(self, text: str):
        self.text = text
        self.at = 0

    def _peek(self, token: str) -> bool:
        return self.text.startswith(token, self.at)

    def _expect(self, token: str) -> None:
        if not self._peek(token):
            raise ToolCallSyntaxError(f"expected {token!r} at {self.at} in {self.text!r}")
        self.at += len(token)

    def _skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def value(self) -> Any:
        self._skip_space()
        if self._peek(QUOTE):
            return self._quoted()
        if self._peek("{"):
            return self._items("{", "}", self._pair, dict)
        if self._peek("["):
            return self._items("[", "]", self.value, list)
        return self._bare()

    def _quoted(self) -> str:
        self._expect(QUOTE)
        end = self.text.find(QUOTE, self.at)
        if end < 0:
            raise ToolCallSyntaxError(f"unterminated string in {self.text!r}")
        value, self.at = self.text[self.at:end], end + len(QUOTE)
        return value

    def _items(self, open_: str, close: str, item: Any, build: Any) -> Any:
        self._expect(open_)
        items = []
        self._skip_space()
        while not self._peek(close):
            items.append(item())
            self._skip_space()
            if self._peek(","):
                self.at += 1
                self._skip_space()
            elif not self._peek(close):
                raise ToolCallSyntaxError(f"expected ',' or {close!r} at {self.at} in {self.text!r}")
        self._expect(close)
        return build(items)

    def _pair(self) -> tuple[str, Any]:
        self._skip_space()
        if self._peek(QUOTE):
            key = self._quoted()
        else:
            colon = self.text.find(":", self.at)
            if colon < 0:
                raise ToolCallSyntaxError(f"expected 'key:' at {self.at} in {self.text!r}")
            key, self.at = self.text[self.at:colon].strip(), colon
        self._expect(":")
        return key, self.value()

    def _bare(self) -> Any:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in ",}]":
            self.at += 1
        raw = self.text[start:self.at].strip()
        if not raw:
            raise ToolCallSyntaxError(f"missing value at {start} in {self.text!r}")
        try:
            return json.loads(raw)  # numbers, true, false, null
        except ValueError:
            return raw  # a bare word the model left unquoted: keep it as a string


def parse_call(body: str) -> dict[str, Any]:
    """One call (`call:NAME{...}`, markers excluded) as an OpenAI tool call."""
    body = body.strip()
    if not body.startswith(_PREFIX) or "{" not in body:
        raise ToolCallSyntaxError(f"a tool call starts with 'call:NAME{{', got {body[:40]!r}")
    brace = body.index("{")
    name = body[len(_PREFIX):brace].strip()
    reader = _Reader(body[brace:])
    arguments = reader.value()
    if not name or reader.at != len(reader.text):
        raise ToolCallSyntaxError(f"unparseable tool call {body!r}")
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


def extract_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(text without the calls that parse, those calls in order)."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    rest = text
    while (start := rest.find(CALL_OPEN)) >= 0:
        end = rest.find(CALL_CLOSE, start)
        if end < 0:
            break
        try:
            calls.append(parse_call(rest[start + len(CALL_OPEN):end]))
            kept.append(rest[:start])
        except ToolCallSyntaxError:
            kept.append(rest[:end + len(CALL_CLOSE)])
        rest = rest[end + len(CALL_CLOSE):]
    kept.append(rest)
    return "".join(kept), calls


def with_tool_calls(completion: Completion) -> Completion:
    """`completion` with Gemma 4 tool calls moved from its text to `tool_calls` (finish_reason
    `tool_calls`, as OpenAI reports it)."""
    if CALL_OPEN not in completion.text:
        return completion
    text, calls = extract_tool_calls(completion.text)
    if not calls:
        return completion
    return replace(completion, text=text, tool_calls=[*(completion.tool_calls or []), *calls],
                   finish_reason="tool_calls")


async def tool_call_chunks(chunks: AsyncIterator[Chunk]) -> AsyncGenerator[Chunk, None]:
    """A stream whose TextChunks never show a well-formed tool call (its markup is held until the
    call ends, then dropped) and whose FinalChunk carries the parsed calls. Markup that turns out
    not to be a call is shown after all, as the final text keeps it."""
    held = ""
    async for chunk in chunks:
        if isinstance(chunk, TextChunk):
            shown, held = _visible(held + chunk.text)
            if shown:
                yield TextChunk(shown)
        elif isinstance(chunk, FinalChunk):
            if held:  # an unclosed call: not a call
                yield TextChunk(held)
            completion = with_tool_calls(chunk.completion)
            # Calls parsed from the text are known whole only now: each is one piece.
            known = len(chunk.completion.tool_calls or [])
            for index, call in enumerate((completion.tool_calls or [])[known:], start=known):
                function = call.get("function") or {}
                yield ToolCallChunk(index, function.get("arguments") or "", id=call.get("id"), name=function.get("name"))
            yield FinalChunk(completion)
        else:
            yield chunk


def _visible(held: str) -> tuple[str, str]:
    """(text safe to show now, text held back: a call still open, or a possible start of one)."""
    shown = []
    while (start := held.find(CALL_OPEN)) >= 0:
        shown.append(held[:start])
        held = held[start:]
        end = held.find(CALL_CLOSE)
        if end < 0:
            return "".join(shown), held
        segment, held = held[: end + len(CALL_CLOSE)], held[end + len(CALL_CLOSE):]
        try:
            parse_call(segment[len(CALL_OPEN): -len(CALL_CLOSE)])
        except ToolCallSyntaxError:
            shown.append(segment)
    keep = partial_suffix(held, CALL_OPEN)
    shown.append(held[: len(held) - keep])
    return "".join(shown), held[len(held) - keep:]
