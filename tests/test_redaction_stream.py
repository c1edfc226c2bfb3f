"""Keys never leave the router in pieces: a secret split across stream chunks, written into a tool
call (arguments or name) or into the model's thinking is redacted on every way out -- the Python
API, `route serve`'s four protocols (plain and streamed) and the CLI (`-m`, `--json`).

The upstream is a real OpenAI-compatible server on loopback (tests/gated_upstream.py: a stream's
second part goes only once the client has its first, so the two are never read as one) that
echoes the key the router sent it: `split` streams "A" + key[:15], then key[15:] + "B"; `tool` calls a tool
with the key in its arguments (split across two deltas) and another tool named after it; `think`
reasons about the key (split across two deltas) before answering "ok".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from backends.types import Chunk, FinalChunk, TextChunk, ThinkingChunk
from router import Router
from router.config_loader import parse_config
from router.server import RouteServer
from tests.gated_upstream import GatedUpstream, Reply, gated

pytestmark = pytest.mark.integration

KEY = "sk-split-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZYXWVUTS"  # no 12-character window repeats
VAR = "ROUTE_TEST_SPLIT_KEY"
CUT = 15
WINDOW = 12  # any run of this many of the key's characters in an output is a leak


def _leaks(text: str) -> list[str]:
    return [KEY[i:i + WINDOW] for i in range(len(KEY) - WINDOW + 1) if KEY[i:i + WINDOW] in text]


def _answer(body: dict[str, Any], key: str) -> Reply:
    """Echoes the key it was sent, as the request's model asks; streamed, in two parts."""
    what = body["model"]
    if what == "split-text":
        return Reply([[{"content": "A" + key[:CUT]}], [{"content": key[CUT:] + "B"}]],
                     message={"content": "A" + key + "B"})
    if what == "thinking":
        thought = "thinking about " + key + " now"
        return Reply([[{"reasoning_content": thought[:len("thinking about ") + CUT]}],
                      [{"reasoning_content": thought[len("thinking about ") + CUT:]}, {"content": "ok"}]],
                     message={"content": "ok", "reasoning_content": thought})
    arguments = '{"token": "' + key + '"}'
    cut = arguments.index(key) + CUT
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    second = {"index": 1, "id": "call_2", "type": "function", "function": {"name": "fn_" + key, "arguments": "{}"}}
    head = {**first, "function": {"name": "lookup", "arguments": arguments[:cut]}}
    tail = {"index": 0, "function": {"arguments": arguments[cut:]}}
    return Reply([[{"tool_calls": [head]}], [{"tool_calls": [tail]}, {"tool_calls": [second]}]], "tool_calls",
                 message={"content": None, "tool_calls": [first, second]})


MODELS = {"split": "split-text", "tool": "tool-call", "think": "thinking"}


def _config_text(base_url: str) -> str:
    lines = ["backends:"]
    for name, model in MODELS.items():
        lines.append(f'  {name}: {{kind: openai, model: {model}, base_url: "{base_url}", api_key: "${{{VAR}}}", '
                     "max_retries: 0}")
    lines += ["routing:", "  tiers: [{name: all, backends: [split]}]"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv(VAR, KEY)
    with gated(_answer) as server:
        yield server


@pytest.fixture
def router(upstream):
    router = Router(parse_config(_config_text(upstream.base_url), "split.yaml"), log=False)
    yield router
    router.close()


async def _stream(router: Router, upstream: GatedUpstream, model: str) -> list[Chunk]:
    """Every chunk of a streamed call; the upstream's second part goes once the first arrived."""
    chunks: list[Chunk] = []
    async for chunk in router.astream("hi", model=model):
        if not any(isinstance(c, (TextChunk, ThinkingChunk)) for c in chunks):
            if isinstance(chunk, (TextChunk, ThinkingChunk)):
                upstream.release()
        chunks.append(chunk)
    return chunks


# -- the Python API -----------------------------------------------------------------------------


async def test_a_key_split_across_stream_chunks_is_redacted_and_the_text_stays_whole(router, upstream):
    chunks = await _stream(router, upstream, "split")
    text = [c.text for c in chunks if isinstance(c, TextChunk)]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert "".join(text) == final.completion.text == "A[REDACTED]B"
    assert text[0] == "A"  # what cannot be part of the key was not held back
    assert not _leaks(repr(chunks))


async def test_thinking_is_redacted_streamed_and_plain(router, upstream):
    chunks = await _stream(router, upstream, "think")
    thought = "".join(c.text for c in chunks if isinstance(c, ThinkingChunk))
    assert thought == "thinking about [REDACTED] now"
    assert not _leaks(repr(chunks))
    result = await router.acomplete("hi", model="think")
    assert result.completion.thinking == "thinking about [REDACTED] now" and result.text == "ok"


async def test_tool_call_arguments_and_names_are_redacted_streamed_and_plain(router, upstream):
    upstream.release()  # tool calls reach the caller whole, in the final chunk
    chunks = await _stream(router, upstream, "tool")
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and not _leaks(repr(chunks))
    plain = await router.acomplete("hi", model="tool")
    for calls in (final.completion.tool_calls, plain.completion.tool_calls):
        assert calls is not None
        assert [c["function"]["arguments"] for c in calls] == ['{"token": "[REDACTED]"}', "{}"]
        assert calls[1]["function"]["name"] == "fn_[REDACTED]"


# -- route serve: the four protocols, plain and streamed ----------------------------------------


GEMINI = "/v1beta/models/{model}"  # the model and the method are in Gemini's path


def _url(path: str, model: str, stream: bool) -> str:
    if path != GEMINI:
        return path
    return path.format(model=model) + (":streamGenerateContent?alt=sse" if stream else ":generateContent")


def _body(path: str, model: str, stream: bool) -> dict[str, Any]:
    if path == GEMINI:  # thoughts asked for, so the thinking comes back too
        return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    if path == "/v1/messages":
        return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    if path == "/v1/responses":
        return {"model": model, "input": "hi", "stream": stream}
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}


@pytest.fixture
def served(router):
    with RouteServer(router) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


# What each answer must still say, redacted, so a test cannot pass on an answer that never came.
EXPECTED = {"split": "[REDACTED]B", "tool": "[REDACTED]", "think": "ok"}
FIRST_TEXT = re.compile(rb'"A(sk-[^"]*)?"')  # the split answer's first part, as any protocol sends it


def _post(client: httpx.Client, upstream: GatedUpstream, path: str, model: str, stream: bool) -> tuple[int, str]:
    if not stream or model != "split":
        upstream.release()  # nothing of these reaches the client before the upstream's last part
        response = client.post(_url(path, model, stream), json=_body(path, model, stream))
        return response.status_code, response.text
    received = b""
    with client.stream("POST", _url(path, model, stream), json=_body(path, model, stream)) as response:
        for data in response.iter_bytes():
            if not FIRST_TEXT.search(received) and FIRST_TEXT.search(received + data):
                upstream.release()
            received += data
        return response.status_code, received.decode()


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses", GEMINI])
@pytest.mark.parametrize("model", list(MODELS))
def test_route_serve_never_sends_the_key_in_any_protocol(served, upstream, path, model, stream):
    status, text = _post(served, upstream, path, model, stream)
    assert status == 200, text
    assert not _leaks(text), text
    assert EXPECTED[model] in text


# -- the CLI --------------------------------------------------------------------------------------


def _route(config: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path.cwd()), VAR: KEY}
    return subprocess.Popen([sys.executable, "-m", "router.cli", "-c", str(config), "--no-log", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=config.parent)


def test_the_cli_prints_no_key_streamed_or_as_json(upstream, tmp_path):
    config = tmp_path / "split.yaml"
    config.write_text(_config_text(upstream.base_url))
    streamed = _route(config, "-m", "split", "hi")
    assert streamed.stdout is not None
    first = os.read(streamed.stdout.fileno(), 1)  # "A": begun, so the second part may go (unbuffered: communicate reads the fd)
    upstream.release()
    out, err = streamed.communicate(timeout=60)
    assert streamed.returncode == 0, err
    assert (first + out).decode().strip() == "A[REDACTED]B" and not _leaks((first + out + err).decode())
    for model in ("think", "tool"):
        shown = _route(config, "--json", "-m", model, "hi")
        out, err = shown.communicate(timeout=60)
        assert shown.returncode == 0, err
        assert not _leaks((out + err).decode()), out
        assert "[REDACTED]" in json.dumps(json.loads(out))
