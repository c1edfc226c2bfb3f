"""`max_tokens` is bounded by what the backends answer (issue 24): a request asking for more than
a backend gives goes to one that gives it, and one asking for more than any gives is a 400 naming
`max_tokens`, on every entry point (the three protocols plain and streamed, the Python API, the
CLI), with nothing sent upstream. On main `max_tokens: 2**62` was accepted and sent on."""

from __future__ import annotations

import textwrap

import httpx
import pytest

from backends.base import OUTPUT_CEILING
from backends.errors import Unsupported
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.helpers import tool_upstream
from tests.test_cli import route

pytestmark = pytest.mark.integration

HUGE = 2**62


@pytest.fixture(scope="module")
def upstreams():
    """Two recording upstreams: `short` answers at most 1,000 tokens, `long` has no stated limit."""
    with tool_upstream() as short, tool_upstream() as long:
        yield short, long


def make(short, long) -> Router:
    def backend(upstream, model: str, **more) -> dict:
        return {"kind": "openai", "model": model, "base_url": upstream.base_url, "max_retries": 0, **more}

    return Router(load_config({
        "backends": {"short": backend(short, "m-short", max_output_tokens=1000), "long": backend(long, "m-long")},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 200},
                    "tiers": [{"name": "low", "below": 0.5, "backends": ["short"]},
                              {"name": "high", "backends": ["long"]}]},
        "consortia": {"pair": {"members": ["short", "long"], "arbiter": "long", "judging": "rank"}},
    }), source="server")


GEMINI = "/v1beta/models/{model}:{method}"  # the model and whether it streams are in Gemini's path


def url(served, path: str, model: str, stream: bool) -> str:
    method = "streamGenerateContent" if stream else "generateContent"
    return served.base_url.removesuffix("/v1") + path.format(model=model, method=method)


def bodies(path: str, model: str, max_tokens: int, stream: bool) -> dict:
    if path == GEMINI:
        return {"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": max_tokens}}
    if path == "/v1/responses":
        return {"model": model, "input": "hi", "max_output_tokens": max_tokens, "stream": stream}
    return {"model": model, "max_tokens": max_tokens, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def served(upstreams):
    short, long = upstreams
    short.bodies.clear()
    long.bodies.clear()
    with RouteServer(make(short, long)) as srv:
        yield srv


PATHS = ["/v1/chat/completions", "/v1/messages", "/v1/responses", GEMINI]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("model", ["auto", "short", "long", "pair"])
def test_more_than_any_backend_answers_is_a_400_naming_max_tokens(served, upstreams, path, model, stream):
    reply = httpx.post(url(served, path, model, stream), json=bodies(path, model, HUGE, stream), timeout=30)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert "max_tokens" in error["message"] and f"{HUGE:,}" in error["message"]
    assert "more than any configured backend answers" in error["message"]
    assert all(not upstream.bodies for upstream in upstreams)


@pytest.mark.parametrize("path", PATHS)
def test_more_than_one_backend_answers_goes_to_one_that_answers_it(served, upstreams, path):
    short, long = upstreams
    # A short prompt: the scorer's pick is `short`, which cannot give 5,000 tokens.
    reply = httpx.post(url(served, path, "auto", False), json=bodies(path, "auto", 5000, False), timeout=30)
    assert reply.status_code == 200, reply.text
    assert not short.bodies
    assert [body["model"] for body in long.bodies] == ["m-long"]
    sent = long.bodies[0]
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 5000


def test_max_completion_tokens_is_bounded_as_max_tokens_is(served, upstreams):
    body = {"model": "auto", "max_completion_tokens": HUGE, "messages": [{"role": "user", "content": "hi"}]}
    reply = httpx.post(served.base_url + "/chat/completions", json=body, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "max_tokens"
    assert all(not upstream.bodies for upstream in upstreams)


def test_asking_one_backend_for_more_than_it_answers_names_it_and_who_can(served, upstreams):
    reply = httpx.post(served.base_url + "/chat/completions", json=bodies("/v1/chat/completions", "short", 5000, False),
                       timeout=30)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "max_tokens_too_large" and error["param"] == "max_tokens"
    assert "'short'" in error["message"] and "long" in error["message"]
    assert all(not upstream.bodies for upstream in upstreams)


def test_python_api_refuses_before_calling(upstreams):
    short, long = upstreams
    short.bodies.clear()
    long.bodies.clear()
    router = make(short, long)
    with pytest.raises(Unsupported, match="max_tokens") as refused:
        router.complete("hi", max_tokens=HUGE)
    assert refused.value.need == "output"
    assert router.complete("hi", max_tokens=5000).completion.backend == "long"
    assert not short.bodies and len(long.bodies) == 1


def test_the_limit_comes_from_config_then_litellms_map_then_the_context_window():
    def limit(**backend) -> int:
        router = Router(load_config({"backends": {"b": {"kind": "openai", **backend}},
                                     "routing": {"tiers": [{"name": "all", "backends": ["b"]}]}}))
        return router.backend("b").output_limit

    pytest.importorskip("litellm")
    assert limit(model="gpt-4o", max_output_tokens=123) == 123
    assert limit(model="gpt-4o") == 16384  # litellm's map
    assert limit(model="made-up-model", context_window=32000) == 32000
    assert limit(model="made-up-model") == OUTPUT_CEILING


@pytest.mark.integration
def test_cli_refuses_in_one_paragraph_without_a_traceback(tmp_path, upstreams):
    short, long = upstreams
    short.bodies.clear()
    long.bodies.clear()
    config = tmp_path / "cfg.yaml"
    config.write_text(textwrap.dedent(f"""\
        backends:
          short: {{kind: openai, model: m-short, base_url: "{short.base_url}", max_output_tokens: 1000}}
          long: {{kind: openai, model: m-long, base_url: "{long.base_url}"}}
        routing:
          tiers: [{{name: all, backends: [short, long]}}]
        """))
    for extra in ([], ["--explain"]):
        result = route("-c", str(config), "--no-log", "--max-tokens", str(HUGE), *extra, "hi")
        assert result.returncode != 0
        assert "max_tokens" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not short.bodies and not long.bodies
