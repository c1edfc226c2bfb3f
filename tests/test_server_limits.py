"""`route serve`'s guards: bearer auth (on/off, constant-time check), refusing to bind beyond
loopback without a token, and the request body limit."""

from __future__ import annotations

import httpx
import openai
import pytest
from typer.testing import CliRunner

from backends.errors import UsageError
from router.cli.app import app
from router.server import RouteServer, api_key_from_env, is_loopback
from tests.helpers import make_router

pytestmark = pytest.mark.integration

TOKEN = "t0ken-" + "x" * 32


def test_with_a_key_every_endpoint_but_healthz_needs_the_bearer_token(sim):
    with RouteServer(make_router(sim), api_key=TOKEN) as srv:
        messages = [{"role": "user", "content": "hi"}]
        for wrong in ("", "nope", TOKEN[:-1], TOKEN + "x"):
            client = openai.OpenAI(base_url=srv.base_url, api_key=wrong or "-", max_retries=0)
            with pytest.raises(openai.AuthenticationError) as caught:
                client.chat.completions.create(model="auto", messages=messages)
            assert caught.value.body["code"] == "invalid_api_key"
        assert httpx.get(f"{srv.base_url}/models").status_code == 401
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        assert httpx.get(f"{srv.url}/healthz").status_code == 200
        good = openai.OpenAI(base_url=srv.base_url, api_key=TOKEN, max_retries=0)
        assert good.chat.completions.create(model="auto", messages=messages).choices[0].message.content
        assert [m.id for m in good.models.list()][0] == "auto"
        assert sim.stats("m-small")["requests"] == 1  # refused requests never reached a backend


def test_without_a_key_loopback_needs_no_token(sim):
    with RouteServer(make_router(sim)) as srv:
        assert httpx.get(f"{srv.base_url}/models").status_code == 200


def test_binding_beyond_loopback_requires_a_token_from_the_environment(monkeypatch):
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    assert api_key_from_env("127.0.0.1", None) is None
    with pytest.raises(UsageError, match="--api-key-env"):
        api_key_from_env("0.0.0.0", None)
    monkeypatch.delenv("ROUTE_SERVE_KEY", raising=False)
    with pytest.raises(UsageError, match="ROUTE_SERVE_KEY.*not set"):
        api_key_from_env("0.0.0.0", "ROUTE_SERVE_KEY")
    monkeypatch.setenv("ROUTE_SERVE_KEY", "short")
    with pytest.raises(UsageError, match="shorter than 16"):
        api_key_from_env("0.0.0.0", "ROUTE_SERVE_KEY")
    monkeypatch.setenv("ROUTE_SERVE_KEY", TOKEN)
    assert api_key_from_env("0.0.0.0", "ROUTE_SERVE_KEY") == TOKEN


def test_cli_refuses_a_public_bind_without_a_key(monkeypatch):
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--api-key-env" in result.output and "Traceback" not in result.output


def test_bodies_over_the_limit_are_413_with_or_without_content_length(sim):
    with RouteServer(make_router(sim), body_limit_bytes=4096) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "x" * 5000}])
        assert caught.value.status_code == 413 and caught.value.body["code"] == "request_too_large"

        def chunked():  # no content-length: the limit is enforced while reading
            yield b'{"model": "auto", "messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}]}'

        response = httpx.post(f"{srv.base_url}/chat/completions", content=chunked(),
                              headers={"content-type": "application/json"})
        assert response.status_code == 413
        small = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "x" * 100}])
        assert small.choices[0].message.content
        assert sim.stats("m-small")["requests"] == 1
