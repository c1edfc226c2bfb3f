"""backends/http_transport.py: SSE data however the bytes were cut, proxies from the environment,
and no session reported as leaked when its owner never closed it."""

from __future__ import annotations

import asyncio
import gc
import json
import logging

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.base import BackendSettings
from backends.http_transport import sse_data
from backends.openai_http import OpenAIBackend
from backends.types import Request
from tests.ports import refusing_port

pytestmark = pytest.mark.integration

PROMPT = Request(messages=[{"role": "user", "content": "Hi"}])


def _ok(request: httpx.Request) -> httpx.Response:
    message = {"role": "assistant", "content": f"via {request.url}"}
    return httpx.Response(200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


async def _chunks(data: bytes, cuts: list[int]):
    start = 0
    for cut in sorted(set(cuts)):
        yield data[start:cut]
        start = cut
    yield data[start:]


@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12), min_size=1, max_size=8),
       st.booleans(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_sse_data_is_the_same_however_the_bytes_are_cut(texts, crlf, cuts):
    end = "\r\n" if crlf else "\n"
    # Each text an event's data, between an event name and a comment that are not data.
    data = "".join(f"event: e{i}{end}data: {text}{end}: keep-alive{end}{end}" for i, text in enumerate(texts)).encode()

    async def read() -> list[bytes]:
        batches = [batch async for batch in sse_data(_chunks(data, [c for c in cuts if c <= len(data)]))]
        assert all(batches)  # a read with no whole event in it yields nothing
        return [payload for batch in batches for payload in batch]

    # Multi-byte characters may be cut between reads: payloads come whole, as bytes, with ASCII
    # whitespace around them dropped (a Unicode space such as U+0085 is data: bytes.strip, not str.strip).
    assert asyncio.run(read()) == [text.encode().strip() for text in texts]


async def test_a_proxy_from_the_environment_is_used_and_no_proxy_is_honoured(answering, monkeypatch):
    proxy = answering(_ok).removesuffix("/v1")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    through = OpenAIBackend(BackendSettings(name="p", model="m", base_url="http://models.example/v1"))
    assert (await through.complete(PROMPT)).text == "via http://models.example/v1/chat/completions"
    await through.aclose()

    with refusing_port() as port:  # a proxy nobody listens on, which the exempt host must not need
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct_url = answering(_ok)
        direct = OpenAIBackend(BackendSettings(name="d", model="m", base_url=direct_url))
        assert (await direct.complete(PROMPT)).text == f"via {direct_url}/chat/completions"
        await direct.aclose()


def test_a_backend_never_closed_is_not_reported_as_a_leak(answering, caplog):
    """Agent code often drops its router without closing it: aiohttp would log each session it
    collects unclosed as an error, at exit or mid-run."""
    backend = OpenAIBackend(BackendSettings(name="b", model="m", base_url=answering(_ok)))
    for _ in range(2):  # two loops, as two asyncio.run calls make: a session each
        assert asyncio.run(backend.complete(PROMPT)).text.startswith("via")
    with caplog.at_level(logging.DEBUG):
        del backend
        gc.collect()
    assert not [r for r in caplog.records if "nclosed" in r.getMessage()], caplog.text
    assert json.dumps([r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]) == "[]"
