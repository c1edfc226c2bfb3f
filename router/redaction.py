"""One redaction step for every string that leaves the process.

The router knows every secret it holds: the values of the environment variables its config
refers to (`api_key: ${NAME}`, `${NAME}` in URLs, headers and parameters) and the server's bearer
tokens. Upstreams often repeat a credential back ("Incorrect API key provided: ..."), and a
model may be made to write one out, so the call path (router/calls.py) redacts every error,
every answer -- its text, thinking, tool calls (names and arguments) and metadata -- and every
stream before anyone sees them: the caller, the CLI, each server protocol, traces, the request
log and metrics.

A stream is redacted as one text, not chunk by chunk: a key may arrive as "A" + key[:15] and
then key[15:] + "B". Per call, a `StreamRedactor` keeps the pieces of every field (the answer,
the thinking, each tool call's arguments) in the order they arrived and holds back
only the end that could be the start of a secret, until the next piece shows whether it is (or
the stream ends: then it is no secret, and goes). The fields are one sequence, so a key split
across two of them is found as well. What is held back is at most one secret's length less a
character, and only when the text so far ends like a secret begins. Every other field of a
chunk -- a tool call's id and name, a thinking signature, a draft, any field a chunk gains --
arrives whole and is redacted whole, found by field rather than listed: a name is written once,
on the piece that opens its call, so it can never be held back.

    redactor.text("key sk-...")        -> "key [REDACTED]"
    stream = redactor.stream()         -> a ChunkRedactor for one call, or None (no secret set)
    stream.chunk(TextChunk("A sk-"))   -> (TextChunk("A "),): "sk-" waits for the next chunk
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

from backends.errors import BackendError
from backends.secrets import env_references
from backends.types import Chunk, Completion, FinalChunk, TextChunk, ThinkingChunk, ToolCallChunk

__all__ = ["MARK", "ChunkRedactor", "Redactor", "Secrets", "StreamRedactor", "encoded_forms"]

MARK = "[REDACTED]"
_SHORTEST = 6  # shorter values would redact ordinary words; no real credential is this short
_HEAD = 4  # characters of a secret's start a text is matched against before the secret is compared whole

# A field of an answer: "text", "thinking", ("tool", index, "name" | "arguments").
Field = Hashable
Piece = tuple[Field, str]


class Secrets:
    """The secret values of one moment (longest first) and the two searches over them."""

    __slots__ = ("_longest", "_may_start", "_pattern", "_starting", "values")

    def __init__(self, values: Iterable[str]):
        self.values: tuple[str, ...] = tuple(sorted(set(values), key=len, reverse=True))
        self._longest = len(self.values[0]) if self.values else 0
        # Alternatives are tried in order at each position: the longest secret there wins.
        self._pattern = re.compile("|".join(map(re.escape, self.values))) if self.values else None
        # Where a proper prefix of some secret may begin: where the rest of the text is a secret's
        # first few characters, or goes on from its first _HEAD; in the second case the secrets
        # beginning so are then compared in turn. (One regex of every proper prefix cost sre ~20 µs
        # a character to compile: 0.1 s for three keys' encoded forms.)
        self._starting: dict[str, tuple[str, ...]] = {}
        heads: set[str] = set()
        for value in self.values:
            self._starting[value[:_HEAD]] = (*self._starting.get(value[:_HEAD], ()), value)
            heads.update(re.escape(value[:size]) for size in range(1, _HEAD))
            heads.add(re.escape(value[:_HEAD]) + ".*")
        self._may_start = re.compile("(?s)(?:" + "|".join(sorted(heads)) + r")\Z") if self.values else None

    def __bool__(self) -> bool:
        return bool(self.values)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets occur in `text`, left to right, not overlapping."""
        if self._pattern is None:
            return []
        return [match.span() for match in self._pattern.finditer(text)]

    def sub(self, text: str) -> str:
        if self._pattern is None or self._pattern.search(text) is None:
            return text  # the same object: callers tell "unchanged" by identity
        return self._pattern.sub(MARK, text)

    def found_in(self, text: str) -> bool:
        return self._pattern is not None and self._pattern.search(text) is not None

    def partial_from(self, text: str, start: int = 0) -> int:
        """The first index >= `start` from which the rest of `text` is a proper prefix of some
        secret: what a stream must hold back. len(text) when there is none."""
        if self._may_start is None:
            return len(text)
        position = max(start, len(text) - self._longest + 1)
        while (found := self._may_start.search(text, position)) is not None:
            at = found.start()
            tail = text[at:]
            if len(tail) < _HEAD or any(len(value) > len(tail) and value.startswith(tail)
                                        for value in self._starting[tail[:_HEAD]]):
                return at
            position = at + 1
        return len(text)

    def hold_from(self, text: str, spans: list[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
        """Where to hold `text` back from, and the spans before that point. A secret found at
        the very end may be the start of a longer one (a key that extends another): then it is
        held back whole, to be decided with the next piece."""
        if spans:
            last_start = spans[-1][0]
            if self.partial_from(text, last_start) == last_start:
                return last_start, spans[:-1]
        return self.partial_from(text, spans[-1][1] if spans else 0), spans

    def pieces(self, pieces: Sequence[Piece], *, hold: bool) -> tuple[list[Piece], list[Piece]]:
        """`pieces`, read as one text, with each secret replaced by MARK (in the piece where it
        starts; its rest in later pieces is dropped). With `hold`, the end that could be the start
        of a secret is returned apart, unchanged: (to send now, to hold back)."""
        joined = pieces[0][1] if len(pieces) == 1 else "".join(text for _, text in pieces)
        spans = self.spans(joined)
        upto = len(joined)
        if hold:
            upto, spans = self.hold_from(joined, spans)
        if not spans and upto == len(joined):
            return list(pieces), []
        return _rebuild(pieces, spans, upto), _slice(pieces, upto, len(joined))


def encoded_forms(secret: str) -> list[str]:
    """`secret` as it is written, and as an upstream (or a model told to) may echo it encoded:
    percent-encoded (a URL, a form body; also every byte as %XX, in either case), JSON-escaped
    (also every character as a literal \\uXXXX, in either case), in hex (either case), and in
    base64 or base64url at each of the three alignments it can take inside a longer encoded text
    (an `Authorization: Basic` header echoed back, a token holding it): each alignment's middle
    part, where no neighbouring byte reaches, is found whatever surrounds the secret. The hex of
    a secret is twice its length, so an ordinary hex string (a git sha, a uuid) is no match."""
    from urllib.parse import quote

    raw = secret.encode("utf-8")
    hexed = raw.hex()
    every_byte = "".join(f"%{hexed[i:i + 2]}" for i in range(0, len(hexed), 2))
    escapes = "".join(f"\\u{ord(char):04x}" for char in secret)  # no provider's key holds a character past U+FFFF
    forms = {secret, quote(secret, safe=""), json.dumps(secret)[1:-1], hexed, hexed.upper(), every_byte,
             every_byte.upper(), escapes, escapes.upper().replace("\\U", "\\u")}
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        start = -(-pad * 4 // 3)  # the characters the padding bytes reach into
        end = len(encoded) - (0 if (pad + len(raw)) % 3 == 0 else 4)  # the last group, shared with what follows
        middle = encoded[start:end]
        if len(middle) >= 2 * _SHORTEST:  # shorter would match ordinary base64 by chance
            forms.update({middle, middle.replace("+", "-").replace("/", "_")})
    return [form for form in forms if len(form) >= _SHORTEST]


def _slice(pieces: Sequence[Piece], start: int, stop: int) -> list[Piece]:
    """The pieces' text between two offsets of their concatenation, field by field."""
    out: list[Piece] = []
    offset = 0
    for field, text in pieces:
        lo, hi = max(start, offset), min(stop, offset + len(text))
        if lo < hi:
            _append(out, field, text[lo - offset:hi - offset])
        offset += len(text)
    return out


def _field_at(pieces: Sequence[Piece], position: int) -> Field:
    offset = 0
    for field, text in pieces:
        offset += len(text)
        if position < offset:
            return field
    return pieces[-1][0]


def _rebuild(pieces: Sequence[Piece], spans: list[tuple[int, int]], upto: int) -> list[Piece]:
    out: list[Piece] = []
    position = 0
    for start, end in spans:
        for field, text in _slice(pieces, position, start):
            _append(out, field, text)
        _append(out, _field_at(pieces, start), MARK)
        position = end
    for field, text in _slice(pieces, position, upto):
        _append(out, field, text)
    return out


def _append(out: list[Piece], field: Field, text: str) -> None:
    if out and out[-1][0] == field:
        out[-1] = (field, out[-1][1] + text)
    elif text:
        out.append((field, text))


class StreamRedactor:
    """The pieces of one stream, redacted as one text: feed each piece as it arrives, get back
    what may be sent now; `end()` gives back what was held at the end of the stream."""

    __slots__ = ("_held", "secrets")

    def __init__(self, secrets: Secrets):
        self.secrets = secrets
        self._held: list[Piece] = []

    def feed(self, field: Field, text: str) -> list[Piece]:
        held = self._held
        if len(held) == 1 and held[0][0] == field:  # the usual hold: the end of this same field
            text, held = held[0][1] + text, []
            self._held = held
        if not held:
            if not text:
                return []
            if not self.secrets.found_in(text):  # the common case: two searches in C, a slice or none
                keep = self.secrets.partial_from(text)
                if keep < len(text):
                    self._held = [(field, text[keep:])]
                    return [(field, text[:keep])] if keep else []
                return [(field, text)]
            send, self._held = self.secrets.pieces([(field, text)], hold=True)
            return send
        pieces = list(held)
        _append(pieces, field, text)
        send, self._held = self.secrets.pieces(pieces, hold=True)
        return send

    def end(self) -> list[Piece]:
        """What was held back, redacted: a secret held because it might have been the start of
        a longer one is replaced now; the rest is no secret, since the stream ended first."""
        held, self._held = self._held, []
        return self.secrets.pieces(held, hold=False)[0] if held else []


# The fields of each kind of chunk that a stream reads as one text, holding back what could be
# the start of a secret (`StreamRedactor`); the FinalChunk's completion is redacted whole by the
# call path (`Redactor.final`) before any observer sees it.
_HELD: dict[type, frozenset[str]] = {TextChunk: frozenset({"text"}), ThinkingChunk: frozenset({"text"}),
                                     ToolCallChunk: frozenset({"name", "arguments"}),  # name: _tool_call
                                     FinalChunk: frozenset({"completion"})}
_WHOLE: dict[type, tuple[str, ...]] = {}  # per kind of chunk: its other fields (_whole_fields)


def _whole_fields(kind: type) -> tuple[str, ...]:
    """Every field of a kind of chunk that may carry an upstream's text and arrives whole (a tool
    call's id, a thinking signature, a draft, whatever a provider's stream adds next), found by
    field, so a field added to a chunk is redacted without anyone remembering to."""
    names = _WHOLE.get(kind)
    if names is None:
        held = _HELD.get(kind, frozenset())
        names = tuple(f.name for f in fields(kind) if f.name not in held and f.name != "kind") \
            if is_dataclass(kind) else ()
        _WHOLE[kind] = names
    return names


_TEXT_WHOLE = _whole_fields(TextChunk)  # () while a TextChunk is its text alone


class ChunkRedactor:
    """One call's stream of chunks through a StreamRedactor: text, thinking and tool-call pieces
    may be held back and come out with a later chunk; at the FinalChunk everything held comes
    out, before it. Every other field of every chunk (ids, signatures, drafts...) is redacted
    whole; the FinalChunk is passed on as it is, since the call path redacts its completion
    (`Redactor.final`) for its observers."""

    __slots__ = ("_stream",)

    def __init__(self, secrets: Secrets):
        self._stream = StreamRedactor(secrets)

    def chunk(self, chunk: Chunk) -> Sequence[Chunk]:
        if type(chunk) is TextChunk and not _TEXT_WHOLE:  # the hot path: one per token or canvas, text alone
            return self._pieces(self._stream.feed("text", chunk.text), chunk)
        whole = _WHOLE.get(type(chunk))
        if whole is None:
            whole = _whole_fields(type(chunk))
        if whole:
            chunk = self._whole(chunk, whole)
        if isinstance(chunk, ThinkingChunk):
            if chunk.signature is not None or chunk.redacted is not None:
                return self._sealed(chunk)
            return self._pieces(self._stream.feed("thinking", chunk.text), chunk)
        if isinstance(chunk, ToolCallChunk):
            return self._tool_call(chunk)
        if isinstance(chunk, FinalChunk):  # its completion was redacted whole, before observers saw it
            return [*self._pieces(self._stream.end()), chunk]
        return (chunk,)

    def _whole(self, chunk: Chunk, names: tuple[str, ...]) -> Chunk:
        secrets = self._stream.secrets
        changes: dict[str, Any] = {}
        for name in names:
            value = getattr(chunk, name)
            if value is None or type(value) in (int, float, bool):
                continue
            redacted = _deep(value, secrets)
            if redacted is not value:
                changes[name] = redacted
        return replace(chunk, **changes) if changes else chunk

    def _sealed(self, chunk: ThinkingChunk) -> Sequence[Chunk]:
        """A signature ends a block of thinking: what is held of it goes out first, redacted,
        and the signature (redacted whole already: `_whole`) goes on the last piece. A redacted
        block (opaque data, no text of ours to search) goes out after what was held."""
        out = list(self._pieces([*self._stream.feed("thinking", chunk.text), *self._stream.end()]))
        if chunk.redacted is not None:
            return [*out, chunk]
        if out and isinstance(out[-1], ThinkingChunk):
            out[-1] = replace(out[-1], signature=chunk.signature)
        else:
            out.append(ThinkingChunk("", signature=chunk.signature))
        return out

    def _tool_call(self, chunk: ToolCallChunk) -> Sequence[Chunk]:
        """A tool call's arguments are a field of the stream like its text. Its name is not: every
        protocol writes a call's name once, on the piece that opens it, so the name goes out whole
        on that piece (redacted whole, never held back: a held end would arrive as a name-only
        piece that no writer writes, and `Bash` would reach the client as `Bas`). A call opening
        ends the block before it, so what was held of that block goes out first, as it is."""
        out: list[Chunk] = []
        if chunk.name or chunk.id is not None:
            out += self._pieces(self._stream.end())
            if chunk.name:
                chunk = replace(chunk, name=self._stream.secrets.sub(chunk.name))
        arguments = ""
        if chunk.arguments:
            for field, text in self._stream.feed(("tool", chunk.index, "arguments"), chunk.arguments):
                if field == ("tool", chunk.index, "arguments"):
                    arguments += text
                else:
                    out += self._pieces([(field, text)])
        if arguments or chunk.id is not None or chunk.name:
            out.append(replace(chunk, arguments=arguments))
        return out

    @staticmethod
    def _pieces(pieces: list[Piece], chunk: TextChunk | ThinkingChunk | None = None) -> Sequence[Chunk]:
        if chunk is not None and len(pieces) == 1 and pieces[0][1] is chunk.text:
            return (chunk,)  # the common case: sent as it came
        return [_chunk_of(field, text) for field, text in pieces]


def _chunk_of(field: Field, text: str) -> Chunk:
    if field == "thinking":
        return ThinkingChunk(text)
    if isinstance(field, tuple) and field[0] == "tool":  # a tool call's held arguments, let out later
        return ToolCallChunk(field[1], text)
    return TextChunk(text)


class Redactor:
    """Replaces the current values of `variables` (read from the environment on each use, so a
    key exported after start-up is covered too) in text, errors, completions and streams."""

    def __init__(self, variables: Iterable[str] = ()):
        self.variables: frozenset[str] = frozenset(variables)  # fixed at construction (router/wiring.py)
        self._cached: tuple[tuple[str, ...], Secrets] = ((), Secrets(()))

    @classmethod
    def for_config(cls, config: object, also: Iterable[str] = ()) -> Redactor:
        """Every variable a config's backends refer to, and `also` (a server's client keys)."""
        backends = getattr(config, "backends", {})
        names: set[str] = set(also)
        for spec in backends.values():
            names.update(env_references(spec.model_dump()))
        return cls(names)

    def secrets(self) -> Secrets:
        """The values to redact now (the compiled search is reused while they stay the same)."""
        values = tuple(sorted({v for v in map(os.environ.get, self.variables) if v and len(v) >= _SHORTEST}))
        if values != self._cached[0]:
            self._cached = (values, Secrets(form for value in values for form in encoded_forms(value)))
        return self._cached[1]

    def text(self, text: str) -> str:
        return self.secrets().sub(text)

    def stream(self) -> ChunkRedactor | None:
        """A redactor for one call's chunks; None when no secret is set (nothing to do)."""
        secrets = self.secrets()
        return ChunkRedactor(secrets) if secrets else None

    def error(self, exc: BaseException) -> BaseException:
        """Redact an exception in place (its message, and a BackendError's body); an exception
        group's members too. Returns it, for `raise redactor.error(exc)`."""
        secrets = self.secrets()
        if not secrets:
            return exc
        exc.args = tuple(secrets.sub(a) if isinstance(a, str) else a for a in exc.args)
        if isinstance(exc, BackendError) and exc.body:
            exc.body = secrets.sub(exc.body)
        for inner in getattr(exc, "exceptions", ()):
            self.error(inner)
        return exc

    def completion(self, completion: Completion) -> Completion:
        """Text, thinking and tool calls read as one sequence (as a stream sends them), so a key
        split between them is found too; every other string of the tool calls and the metadata
        on its own."""
        secrets = self.secrets()
        if not secrets:
            return completion
        fields = _fields(completion)
        send, _ = secrets.pieces(fields, hold=False)
        redacted: dict[Field, str] = {field: "" for field, _ in fields}
        for field, text in send:
            redacted[field] += text
        changes = _changes(completion, redacted, secrets)
        return replace(completion, **changes) if changes else completion

    def final(self, chunk: FinalChunk) -> FinalChunk:
        completion = self.completion(chunk.completion)
        return chunk if completion is chunk.completion else replace(chunk, completion=completion)


def _fields(completion: Completion) -> list[Piece]:
    """A completion's free text in the order a stream sends it: thinking, text, tool calls."""
    fields: list[Piece] = [("thinking", completion.thinking or ""), ("text", completion.text)]
    for index, call in enumerate(completion.tool_calls or ()):
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            for part in ("name", "arguments"):
                if isinstance(function.get(part), str):
                    fields.append((("tool", index, part), function[part]))
    return fields


def _changes(completion: Completion, redacted: dict[Field, str], secrets: Secrets) -> dict[str, Any]:
    """The fields of `completion` that redaction changed, with their new values."""
    changes: dict[str, Any] = {}
    if redacted["text"] != completion.text:
        changes["text"] = redacted["text"]
    if completion.thinking is not None and redacted["thinking"] != completion.thinking:
        changes["thinking"] = redacted["thinking"]
    if completion.tool_calls:
        calls = _tool_calls(completion.tool_calls, redacted, secrets)
        if calls != completion.tool_calls:
            changes["tool_calls"] = calls
    metadata = _deep(completion.metadata, secrets)
    if metadata is not completion.metadata:
        changes["metadata"] = metadata
    return changes


def _tool_calls(calls: list[dict[str, Any]], redacted: dict[Field, str], secrets: Secrets) -> list[dict[str, Any]]:
    out = []
    for index, call in enumerate(calls):
        call = _deep(call, secrets)  # ids, types and anything else a provider put there
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts = {part: redacted[("tool", index, part)] for part in ("name", "arguments")
                     if ("tool", index, part) in redacted}
            call = {**call, "function": {**function, **parts}}
        out.append(call)
    return out


def _deep(value: Any, secrets: Secrets) -> Any:
    """`value` with secrets replaced in every string inside dicts, lists and tuples; the same
    object when nothing changed."""
    if isinstance(value, str):
        return secrets.sub(value)
    if isinstance(value, dict):
        return _deep_dict(value, secrets)
    if isinstance(value, (list, tuple)):
        return _deep_sequence(value, secrets)
    return value


def _deep_dict(value: dict[Any, Any], secrets: Secrets) -> dict[Any, Any]:
    items = {key: _deep(item, secrets) for key, item in value.items()}
    return value if all(items[key] is value[key] for key in value) else items


def _deep_sequence(value: list[Any] | tuple[Any, ...], secrets: Secrets) -> list[Any] | tuple[Any, ...]:
    items = [_deep(item, secrets) for item in value]
    if all(new is old for new, old in zip(items, value)):
        return value
    return tuple(items) if isinstance(value, tuple) else items
