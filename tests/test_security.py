"""Credentials never leave the process, and are never written into a config.

The upstream here is the simulator's `echo-key` fault: a 401 that repeats the caller's key in
its message, as providers do ("Incorrect API key provided: sk-..."). Every path a string takes
out of the router is checked: the Python API (plain and streamed), `route serve` (plain and
streamed), the CLI's stderr and --json, consortium traces, the litellm backend, and the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from backends.errors import AllBackendsFailed, ConfigError
from router import Router
from router.config_loader import parse_config
from router.server import RouteServer
from router.store import Store

pytestmark = pytest.mark.integration

KEY = "sk-test-" + "k3y" * 12  # what the upstream will echo back
VAR = "ROUTE_TEST_UPSTREAM_KEY"


@pytest.fixture
def echoing(sim, monkeypatch, tmp_path) -> Path:
    """A config whose backends send $VAR to an upstream that echoes it in a 401."""
    monkeypatch.setenv(VAR, KEY)
    for model in ("sim-a", "sim-b", "judge"):
        sim.update_profile(model, fault="echo-key")
    path = tmp_path / "echo.yaml"
    path.write_text(f"""\
backends:
  a: {{kind: openai, model: sim-a, base_url: "{sim.base_url}", api_key: "${{{VAR}}}", max_retries: 0}}
  b: {{kind: litellm, model: openai/sim-b, base_url: "{sim.base_url}", api_key: "${{{VAR}}}", max_retries: 0}}
  judge: {{kind: openai, model: judge, base_url: "{sim.base_url}", api_key: "${{{VAR}}}", max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [a, b]}}]
consortia:
  panel: {{members: [a, b], arbiter: judge, retries: 0}}
log: {{path: "{tmp_path / 'route.db'}"}}
""")
    return path


def _clean(text: str) -> None:
    assert KEY not in text and KEY[:20] not in text, text


async def test_python_api_errors_never_carry_the_key(echoing):
    router = Router.from_config(str(echoing))
    for model in ("auto", "a", "b", "panel"):
        with pytest.raises(AllBackendsFailed) as caught:
            await router.acomplete("hi", model=model)
        _clean(str(caught.value))
        _clean(repr([str(e) + str(getattr(e, "body", "")) for e in caught.value.exceptions]))
        assert "Incorrect API key provided: [REDACTED]" in str(caught.value) or model == "panel"
        with pytest.raises(AllBackendsFailed) as streamed:
            [chunk async for chunk in router.astream("hi", model=model)]
        _clean(str(streamed.value))
    await router.aclose()
    router.request_log.flush()
    rows = Store(echoing.parent / "route.db").recent(limit=100)
    assert len(rows) == 8
    _clean(json.dumps([dict(r.__dict__) if hasattr(r, "__dict__") else r for r in rows], default=str))


def test_route_serve_responses_never_carry_the_key(echoing):
    router = Router.from_config(str(echoing), log=False)
    with RouteServer(router) as server:
        for model in ("auto", "a", "b", "panel"):
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            plain = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30)
            assert plain.status_code >= 400
            _clean(plain.text + json.dumps(dict(plain.headers)))
            streamed = httpx.post(f"{server.base_url}/chat/completions", json={**body, "stream": True}, timeout=30)
            _clean(streamed.text)
        metrics = httpx.get(server.base_url.removesuffix("/v1") + "/metrics", timeout=10)
        _clean(metrics.text)


def test_cli_stderr_and_json_never_carry_the_key(echoing, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path.cwd()), VAR: KEY}
    for args in (["-m", "a", "hi"], ["--json", "-m", "b", "hi"], ["--json", "-m", "panel", "hi"]):
        done = subprocess.run([sys.executable, "-m", "router.cli", "-c", str(echoing), *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=60)
        assert done.returncode == 3, done.stderr
        _clean(done.stdout + done.stderr)
    shown = subprocess.run([sys.executable, "-m", "router.cli", "log", "-n", "10", "--json", "-c", str(echoing)],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    _clean(shown.stdout + shown.stderr)


def test_a_key_in_the_url_is_a_reference_resolved_per_request(sim, monkeypatch):
    monkeypatch.setenv(VAR, KEY)
    text = f"""\
backends:
  q: {{kind: openai, model: sim-q, base_url: "{sim.base_url}?key=${{{VAR}}}", max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [q]}}]
"""
    router = Router(parse_config(text, "q.yaml"), log=False)
    assert router.complete("hi").text.startswith("[simulated sim-q]")  # the path went before the query
    sim.update_profile("sim-q", fault="echo-key")
    with pytest.raises(AllBackendsFailed) as caught:
        router.complete("hi")
    _clean(str(caught.value))
    assert "[REDACTED]" in str(caught.value)
    router.close()


LITERALS = [
    ("params: {api_key: sk-literal-123456}", "params.api_key is a credential"),
    ("options: {token: abcdef123456}", "options.token is a credential"),
    ("passthrough: {x_api_key: abcdef123456}", "passthrough.x_api_key is a credential"),
    ("headers: {Authorization: Bearer abcdef123456}", "headers.Authorization is a credential"),
    ('base_url: "https://user:hunter22@example.com/v1"', "a password in the URL"),
    ('base_url: "https://example.com/v1?key=AIzaSyLiteral"', "the query parameter 'key'"),
]


@pytest.mark.parametrize("line, message", LITERALS)
def test_literal_secrets_are_refused_with_file_and_line(line, message):
    text = f"""\
backends:
  x:
    kind: openai
    model: m
    {line}
routing:
  tiers: [{{name: all, backends: [x]}}]
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "lit.yaml")
    assert message in str(caught.value) and str(caught.value).startswith("lit.yaml:5: ")
    for secret in ("sk-literal-123456", "abcdef123456", "hunter22", "AIzaSyLiteral"):
        assert secret not in str(caught.value)


@pytest.mark.parametrize(("line", "kept"), [
    ("params: {user: alice}", ("params", {"user": "alice"})),
    ("headers: {Authorization: 'Bearer ${ROUTE_T}'}", ("headers", {"Authorization": "Bearer ${ROUTE_T}"})),
    ("passthrough: {api_key: '${ROUTE_T}'}", ("passthrough", {"api_key": "${ROUTE_T}"})),
    ('base_url: "https://example.com/v1?key=${ROUTE_T}"', ("base_url", "https://example.com/v1?key=${ROUTE_T}")),
])
def test_references_are_accepted_wherever_a_secret_may_go_and_kept_unresolved(line, kept, monkeypatch):
    monkeypatch.setenv("ROUTE_T", "resolved-secret-value")
    text = f"backends:\n  x:\n    kind: openai\n    model: m\n    {line}\nrouting:\n  tiers: [{{name: all, backends: [x]}}]\n"
    spec = parse_config(text, "ok.yaml").config.backends["x"]
    field, value = kept
    assert getattr(spec, field) == value  # the reference as written: resolved per request, never stored
    assert "resolved-secret-value" not in json.dumps(spec.model_dump())


# Credentials that no key name gives away: a cookie, a key pasted under a header of any name, a key
# in the URL's fragment or under a query parameter of any name. Each is refused at load with file
# and line, and the message never repeats it.
HIDDEN = [
    ('headers: {Cookie: "session=s3ss10nT0k3nValue9876"}', "headers.Cookie is a credential", "s3ss10nT0k3nValue9876"),
    ('headers: {X-Custom: "sk-proj-AbCdEf0123456789xyz"}', "headers.X-Custom is a credential", "AbCdEf0123456789xyz"),
    ('headers: {X-Blob: "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW"}', "headers.X-Blob is a credential", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW"),
    ('headers: {X-Forwarded: "Bearer abcdef123456"}', "headers.X-Forwarded is a credential", "abcdef123456"),
    ('headers: {X-Prefs: "theme=dark; sid=0123abcd4567"}', "headers.X-Prefs is a credential", "0123abcd4567"),
    ('base_url: "https://example.com/v1#key=AIzaSyLiteral0123456789abcdefghijklmn"', "the fragment parameter 'key'",
     "AIzaSyLiteral0123456789"),
    ('base_url: "https://example.com/v1#sk-live-0123456789abcdefghij"', "the URL's fragment", "0123456789abcdefghij"),
    ('base_url: "https://example.com/v1?x=sk-proj-0123456789abcdefghij"', "the query parameter 'x'",
     "0123456789abcdefghij"),
    ('base_url: "https://example.com/sk-proj-0123456789abcdefghij/v1"', "the URL's path", "0123456789abcdefghij"),
]


@pytest.mark.parametrize("line, message, secret", HIDDEN)
def test_credentials_under_any_name_are_refused_with_file_and_line(line, message, secret):
    text = f"backends:\n  x:\n    kind: openai\n    model: m\n    {line}\nrouting:\n  tiers: [{{name: all, backends: [x]}}]\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "hid.yaml")
    assert message in str(caught.value) and str(caught.value).startswith("hid.yaml:5: "), str(caught.value)
    assert secret not in str(caught.value)


@pytest.mark.parametrize("line", [
    'headers: {anthropic-version: "2023-06-01"}',
    'headers: {anthropic-beta: "prompt-caching-2024-07-31,max-tokens-3-5-sonnet-2024-07-15"}',
    'headers: {HTTP-Referer: "https://myapp.example.com/route", X-Title: "My Coding Assistant 2"}',
    'headers: {OpenAI-Organization: "org-AbCdEf123456789", OpenAI-Project: "proj_AbCdEf123456"}',
    'headers: {Cookie: "session=${ROUTE_SESSION}", X-Client: "Mozilla/5.0 (X11; Linux x86_64) route/0.1"}',
    'base_url: "https://gateway.ai.cloudflare.com/v1/0123456789abcdef0123456789abcdef/my-gateway/openai"',
    'base_url: "https://x.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-02-01"',
    'base_url: "https://example.com/v1#section-2"',
])
def test_ordinary_headers_and_urls_still_load(line):
    text = f"backends:\n  x:\n    kind: openai\n    model: m\n    {line}\nrouting:\n  tiers: [{{name: all, backends: [x]}}]\n"
    parse_config(text, "ok.yaml")
