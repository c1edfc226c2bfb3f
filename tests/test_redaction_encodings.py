"""A key echoed in a common encoding is redacted like the key itself (issue 47): in hex (either
case), percent-encoded byte by byte (either case), and as literal \\uXXXX escapes, in a whole
answer and in a stream that splits the encoded key across two chunks; while the hex strings an
answer ordinarily holds -- a git sha, a uuid, a digest -- go through untouched.

The upstream is a real OpenAI-compatible server on loopback (tests/gated_upstream.py: a stream's
second part goes only once the client has its first) that echoes the key the router sent it, in
the form the request's model names.
"""

from __future__ import annotations

from typing import Any

import pytest

from backends.types import FinalChunk, TextChunk
from router import Router
from router.config_loader import parse_config
from tests.gated_upstream import GatedUpstream, Reply, gated

pytestmark = pytest.mark.integration

KEY = "sk-enc-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZYXWVUTS"
VAR = "ROUTE_TEST_ENCODED_KEY"


def _escapes(key: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in key)


ENCODINGS = {
    "hex": lambda k: k.encode().hex(),
    "hex-upper": lambda k: k.encode().hex().upper(),
    "percent": lambda k: "".join(f"%{b:02x}" for b in k.encode()),
    "percent-upper": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
    "escapes": _escapes,
    "escapes-upper": lambda k: _escapes(k).upper().replace("\\U", "\\u"),
}
ORDINARY = ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8, request 123e4567-e89b-12d3-a456-426614174000, "
            "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def _answer(body: dict[str, Any], key: str) -> Reply:
    if body["model"] == "ordinary":
        half = len(ORDINARY) // 2
        return Reply([[{"content": ORDINARY[:half]}], [{"content": ORDINARY[half:]}]], message={"content": ORDINARY})
    text = "echo " + ENCODINGS[body["model"]](key) + " end"
    cut = len(text) // 2  # inside the encoded key
    return Reply([[{"content": text[:cut]}], [{"content": text[cut:]}]], message={"content": text})


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv(VAR, KEY)
    with gated(_answer) as server:
        yield server


@pytest.fixture
def router(upstream):
    lines = ["backends:"]
    for name in [*ENCODINGS, "ordinary"]:
        lines.append(f'  {name}: {{kind: openai, model: {name}, base_url: "{upstream.base_url}", '
                     f'api_key: "${{{VAR}}}", max_retries: 0}}')
    lines += ["routing:", "  tiers: [{name: all, backends: [hex]}]"]
    router = Router(parse_config("\n".join(lines) + "\n", "encoded.yaml"), log=False)
    yield router
    router.close()


async def _streamed(router: Router, upstream: GatedUpstream, model: str) -> tuple[list[str], str]:
    """The text chunks of a streamed call, and its final completion's text."""
    texts: list[str] = []
    final = ""
    async for chunk in router.astream("hi", model=model):
        if isinstance(chunk, TextChunk):
            if not texts:
                upstream.release()
            texts.append(chunk.text)
        elif isinstance(chunk, FinalChunk):
            final = chunk.completion.text
    return texts, final


@pytest.mark.parametrize("encoding", list(ENCODINGS))
async def test_a_key_echoed_encoded_is_redacted_whole_and_split_across_chunks(router, upstream, encoding):
    encoded = ENCODINGS[encoding](KEY)
    plain = await router.acomplete("hi", model=encoding)
    assert plain.text == "echo [REDACTED] end"
    texts, final = await _streamed(router, upstream, encoding)
    assert "".join(texts) == final == "echo [REDACTED] end"
    assert not any(encoded[i:i + 16] in "".join(texts) for i in range(len(encoded) - 15))


async def test_ordinary_hex_strings_are_left_alone_whole_and_streamed(router, upstream):
    assert (await router.acomplete("hi", model="ordinary")).text == ORDINARY
    texts, final = await _streamed(router, upstream, "ordinary")
    assert "".join(texts) == final == ORDINARY
