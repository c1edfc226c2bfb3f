"""The stream redactor on its own: however a text holding secrets is cut into pieces, and into
whichever fields, what it lets out is what redacting the whole text at once gives, no secret
ever goes out, and it holds back less than a secret's length, only while the text could still
be turning into one."""

from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.types import Completion, FinalChunk, TextChunk, ThinkingChunk, ToolCallChunk
from router.redaction import MARK, Redactor, Secrets, StreamRedactor, encoded_forms

pytestmark = pytest.mark.unit

SECRETS = ["sk-abc123456789", "sk-abc123456789-longer-key", "tok_zzzzzz", "9f8e7d6c5b4a"]
FIELDS = ["text", "thinking", ("tool", 0, "arguments")]

# Text made mostly of the secrets' own characters, so near misses and overlaps are common.
_FILLER = st.text(alphabet="sk-abc1234567890_tozlgre9f8e7d6 ", max_size=12)
_TEXT = st.lists(st.one_of(_FILLER, st.sampled_from(SECRETS), st.sampled_from([s[:-1] for s in SECRETS])),
                 max_size=8).map("".join)


@st.composite
def _pieces(draw: st.DrawFn) -> list[tuple[object, str]]:
    text = draw(_TEXT)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    field = st.sampled_from(FIELDS)
    return [(draw(field), text[a:b]) for a, b in zip(bounds, bounds[1:])]


def _joined(pieces: list[tuple[object, str]]) -> dict[object, str]:
    out: dict[object, str] = {}
    for field, text in pieces:
        out[field] = out.get(field, "") + text
    return out


@settings(max_examples=400, deadline=None)
@given(_pieces())
def test_a_stream_in_any_pieces_comes_out_as_the_whole_text_redacted_at_once(pieces):
    secrets = Secrets(SECRETS)
    stream = StreamRedactor(secrets)
    sent: list[tuple[object, str]] = []
    for field, text in pieces:
        sent += stream.feed(field, text)
        held = "".join(t for _, t in stream._held)
        assert len(held) < max(map(len, SECRETS))
        assert not held or any(s.startswith(held[i:]) for s in SECRETS for i in range(len(held)))
        assert not any(secret in "".join(t for _, t in sent) for secret in SECRETS)
    sent += stream.end()
    whole, _ = secrets.pieces([p for p in pieces if p[1]], hold=False)
    assert _joined(sent) == _joined(whole)
    assert not any(secret in "".join(t for _, t in sent) for secret in SECRETS)


def test_only_what_could_begin_a_secret_is_held_and_it_goes_at_the_end():
    stream = StreamRedactor(Secrets(["sk-abc123456789"]))
    assert stream.feed("text", "ask") == [("text", "a")]  # "sk" may begin the key
    assert stream.feed("text", "-abc1") == []
    assert stream.feed("text", "23456789 then") == [("text", MARK + " then")]
    assert stream.feed("text", " sk-ab") == [("text", " ")]
    assert stream.feed("thinking", "c!") == [("text", "sk-ab"), ("thinking", "c!")]  # not a key after all
    assert stream.feed("text", "risk") == [("text", "ri")]
    assert stream.end() == [("text", "sk")]


def test_a_key_split_between_thinking_and_the_answer_is_found(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    redactor = Redactor(["ROUTE_TEST_K"])
    stream = redactor.stream()
    assert stream is not None
    chunks = [*stream.chunk(ThinkingChunk("about sk-abc")), *stream.chunk(TextChunk("123456789 ok"))]
    completion = Completion(text="123456789 ok", thinking="about sk-abc", backend="b", model="m")
    chunks += stream.chunk(FinalChunk(redactor.completion(completion)))
    assert [type(c).__name__ for c in chunks] == ["ThinkingChunk", "ThinkingChunk", "TextChunk", "FinalChunk"]
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingChunk)) == "about " + MARK
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == " ok"
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert (final.completion.thinking, final.completion.text) == ("about " + MARK, " ok")


def test_no_secret_set_means_no_stream_redactor_and_completions_pass_as_they_are(monkeypatch):
    monkeypatch.delenv("ROUTE_TEST_K", raising=False)
    redactor = Redactor(["ROUTE_TEST_K"])
    completion = Completion(text="sk-abc123456789", backend="b", model="m", tool_calls=[{"id": "x"}])
    assert redactor.stream() is None and redactor.completion(completion) is completion


def test_tool_calls_metadata_and_ids_are_redacted_and_the_rest_kept(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    redactor = Redactor(["ROUTE_TEST_K"])
    calls: list[dict[str, Any]] = [{"id": "call_sk-abc123456789", "type": "function",
              "function": {"name": "f", "arguments": '{"k": "sk-abc123456789"}'}}]
    completion = Completion(text="t", backend="b", model="m", tool_calls=calls,
                            metadata={"trace": [{"answer": "sk-abc123456789"}], "n": 3})
    out = redactor.completion(completion)
    assert out.tool_calls == [{"id": "call_" + MARK, "type": "function",
                               "function": {"name": "f", "arguments": '{"k": "' + MARK + '"}'}}]
    assert out.metadata == {"trace": [{"answer": MARK}], "n": 3}
    assert calls[0]["function"]["arguments"] == '{"k": "sk-abc123456789"}'  # the original is not changed


def test_a_key_split_across_streamed_tool_call_pieces_is_redacted_and_the_call_still_opens(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    stream = Redactor(["ROUTE_TEST_K"]).stream()
    assert stream is not None
    chunks = [*stream.chunk(ToolCallChunk(0, "", id="call_1", name="shell")),
              *stream.chunk(ToolCallChunk(0, '{"cmd": "echo sk-abc')),
              *stream.chunk(ToolCallChunk(0, '123456789"}'))]
    chunks += stream.chunk(FinalChunk(Completion(text="", backend="b", model="m")))
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert (calls[0].id, calls[0].name) == ("call_1", "shell")  # the call opens at once
    assert "".join(c.arguments for c in calls) == '{"cmd": "echo ' + MARK + '"}'
    assert all(c.index == 0 for c in calls)


def test_a_thinking_signature_is_kept_and_ends_the_block(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    stream = Redactor(["ROUTE_TEST_K"]).stream()
    assert stream is not None
    chunks = [*stream.chunk(ThinkingChunk("let me ask sk")), *stream.chunk(ThinkingChunk("", signature="sig-1")),
              *stream.chunk(TextChunk("done"))]
    thinking = [c for c in chunks if isinstance(c, ThinkingChunk)]
    assert "".join(c.text for c in thinking) == "let me ask sk" and thinking[-1].signature == "sig-1"


def test_a_redacted_thinking_block_goes_out_whole_after_what_was_held(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    stream = Redactor(["ROUTE_TEST_K"]).stream()
    assert stream is not None
    chunks = [*stream.chunk(ThinkingChunk("let me ask sk")), *stream.chunk(ThinkingChunk("", redacted="opaque==")),
              *stream.chunk(TextChunk("done"))]
    thinking = [c for c in chunks if isinstance(c, ThinkingChunk)]
    assert "".join(c.text for c in thinking[:-1]) == "let me ask sk"  # the held "sk" first
    assert (thinking[-1].text, thinking[-1].redacted) == ("", "opaque==")
    assert chunks.index(thinking[-1]) < chunks.index(next(c for c in chunks if isinstance(c, TextChunk)))


@dataclass(frozen=True, slots=True)
class _SealedBlock:
    """A kind of chunk the stream redactor has never heard of, as a provider's stream may add
    (an encrypted block, a citation): its fields are redacted all the same."""

    data: str
    blocks: tuple[dict[str, Any], ...] = ()
    index: int = 0
    kind: str = "sealed"


def test_every_field_of_every_chunk_is_redacted_whole_ids_signatures_and_new_ones(monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_K", "sk-abc123456789")
    stream = Redactor(["ROUTE_TEST_K"]).stream()
    assert stream is not None
    chunks = [*stream.chunk(ToolCallChunk(0, "", id="call_sk-abc123456789", name="shell")),
              *stream.chunk(ThinkingChunk("thought", signature="sig-sk-abc123456789")),
              *stream.chunk(_SealedBlock("enc-sk-abc123456789", ({"signature": "sk-abc123456789"},), 3)),  # type: ignore[arg-type]
              *stream.chunk(FinalChunk(Completion(text="", backend="b", model="m")))]
    assert "sk-abc123456789" not in repr(chunks)
    call = next(c for c in chunks if isinstance(c, ToolCallChunk))
    assert (call.id, call.name) == ("call_" + MARK, "shell")
    assert [c.signature for c in chunks if isinstance(c, ThinkingChunk) and c.signature] == ["sig-" + MARK]
    sealed = next(c for c in chunks if isinstance(c, _SealedBlock))
    assert (sealed.data, sealed.blocks, sealed.index) == ("enc-" + MARK, ({"signature": MARK},), 3)


@pytest.mark.parametrize("encode", [
    lambda k: "Authorization: Basic " + base64.b64encode(f"user:{k}".encode()).decode(),
    lambda k: "token " + base64.urlsafe_b64encode(f"{{\"key\": \"{k}\", \"n\": 1}}".encode()).decode(),
    lambda k: "GET /v1/models?key=" + urllib.parse.quote(k, safe=""),
    lambda k: json.dumps({"echo": k + "\n"}),
])
def test_a_key_echoed_encoded_is_redacted_too(monkeypatch, encode):
    key = "sk-ant/api03+AbCd=Ef0123456789xyz"
    monkeypatch.setenv("ROUTE_TEST_K", key)
    redactor = Redactor(["ROUTE_TEST_K"])
    text = encode(key)
    out = redactor.text(text)
    assert MARK in out
    assert not any(form in out for form in encoded_forms(key))
    stream = redactor.stream()
    assert stream is not None
    streamed = "".join(c.text for piece in (text[:17], text[17:]) for c in stream.chunk(TextChunk(piece))
                       if isinstance(c, TextChunk))
    streamed += "".join(c.text for c in stream.chunk(FinalChunk(Completion(text="", backend="b", model="m")))
                        if isinstance(c, TextChunk))
    assert MARK in streamed and not any(form in streamed for form in encoded_forms(key))
