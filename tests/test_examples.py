"""The runnable examples run, and the example configs load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from router.config_loader import load_config
from router.server import RouteServer
from tests.helpers import make_router

pytestmark = pytest.mark.integration  # subprocesses

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_python_api_example_runs_against_the_simulator():
    result = subprocess.run([sys.executable, str(EXAMPLES / "python_api.py")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("diffusiongemma") and "[simulated" in lines[0]
    assert any(line.startswith("panel: 4 model calls") for line in lines)


def test_nested_consortium_example_loads():
    loaded = load_config(EXAMPLES / "nested_consortium.yaml")
    assert {"cns-glm", "cns-kimi", "cns-meta-glm-kimi"} <= set(loaded.config.consortia)


def test_editor_integration_files_parse():
    opencode = json.loads((EXAMPLES / "opencode.json").read_text())
    assert "127.0.0.1:4000" in json.dumps(opencode)
    models = yaml.safe_load((EXAMPLES / "llm_extra_openai_models.yaml").read_text())
    assert any(m.get("model_name") == "auto" or m.get("model_id") for m in models)


def _run_example(name: str, url: str, *, model: str = "auto") -> subprocess.CompletedProcess:
    env = {**os.environ, "ROUTE_URL": url, "ROUTE_MODEL": model}
    return subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=120,
                          env=env)


def test_anthropic_sdk_example_runs_a_tool_round_trip(sim):
    sim.script("m-small", ["2, 3 and 5.", "Waiting, then all at once.",
                           {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}, "Sunny, 22 C."])
    with RouteServer(make_router(sim, aliases={"claude-*": "auto"})) as server:
        result = _run_example("anthropic_sdk.py", server.url, model="claude-sonnet-4-6")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2, 3 and 5. [end_turn]" and lines[1] == "Waiting, then all at once."
    assert "tool call: [('get_weather', {'city': 'Paris'})]" in lines and lines[-1] == "answer: Sunny, 22 C."


def test_google_genai_sdk_example_runs_a_function_call_round_trip(sim):
    sim.script("m-small", ["2, 3 and 5.", "Waiting, then all at once.",
                           {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}, "Sunny, 22 C."])
    with RouteServer(make_router(sim, aliases={"gemini-*": "auto"})) as server:
        result = _run_example("google_genai_sdk.py", server.url, model="gemini-2.5-pro")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2, 3 and 5. [STOP]" and lines[1] == "Waiting, then all at once."
    assert "function call: [('get_weather', {'city': 'Paris'})]" in lines and lines[-1] == "answer: Sunny, 22 C."
    assert sim.stats("m-small")["requests"] == 4  # the function's result went back for the answer


def test_openai_agents_sdk_example_calls_its_tool(sim):
    pytest.importorskip("agents", reason="the example needs `pip install openai-agents`")
    sim.script("m-small", [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                           "It is sunny in Paris."])
    with RouteServer(make_router(sim)) as server:
        result = _run_example("openai_agents_sdk.py", server.base_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "It is sunny in Paris."
    assert sim.stats("m-small")["requests"] == 2  # the tool's result went back for the answer


def test_agent_config_files_parse():
    import tomllib

    codex = tomllib.loads((EXAMPLES / "codex_config.toml").read_text())
    assert codex["model_providers"]["route"]["wire_api"] == "responses"
    assert codex["model_providers"]["route"]["base_url"] == "http://127.0.0.1:4000/v1"
    script = (EXAMPLES / "claude_code.sh").read_text()
    assert "ANTHROPIC_BASE_URL" in script and "@anthropic-ai/claude-code" in script
    gemini = (EXAMPLES / "gemini_cli.sh").read_text()
    assert "GOOGLE_GEMINI_BASE_URL" in gemini and "@google/gemini-cli" in gemini and "gemini-api-key" in gemini


def test_deploy_example_is_two_replicas_sharing_redis_and_postgres(monkeypatch):
    """examples/deploy: compose's replicas run options `route serve` has, with a route.yaml that
    loads, shares state through Redis, logs to PostgreSQL, and names the model vLLM serves."""
    from typer.testing import CliRunner

    from router.cli.app import app

    compose = yaml.safe_load((EXAMPLES / "deploy" / "compose.yaml").read_text())
    services = compose["services"]
    replicas = [s for name, s in services.items() if name.startswith("route-")]
    assert len(replicas) == 2 and len({r["ports"][0] for r in replicas}) == 2
    command = replicas[0]["command"]
    assert command[0] == "serve" and command[command.index("--workers") + 1] == "2"
    serve_help = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).stdout
    assert all(flag in serve_help for flag in command if flag.startswith("--"))
    assert {"ROUTE_REDIS_URL", "ROUTE_PG_DSN", "ROUTE_API_KEY"} <= set(replicas[0]["environment"])

    for name in ("ROUTE_REDIS_URL", "ROUTE_PG_DSN", "INCEPTION_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "set-by-compose")
    config = load_config(EXAMPLES / "deploy" / "route.yaml").config
    assert (config.state.backend, config.state.url) == ("redis", "${ROUTE_REDIS_URL}")
    assert (config.log.backend, config.log.dsn) == ("postgres", "${ROUTE_PG_DSN}")
    vllm = services["vllm"]["command"]
    served = vllm[vllm.index("--served-model-name") + 1]
    assert config.backends["diffusiongemma"].model == served
    assert config.backends["diffusiongemma"].base_url == "http://vllm:8000/v1"
    assert {"--max-num-seqs", "--generation-config", "--gpu-memory-utilization"} <= set(vllm)


@pytest.mark.parametrize(("example", "module", "extra"), [
    ("agents_sdk_in_process.py", "agents", "agents"),
    ("langchain_in_process.py", "langchain_core", "langchain"),
    ("pydantic_ai_in_process.py", "pydantic_ai", "pydantic-ai"),
])
def test_in_process_agent_examples_make_a_tool_round_trip_and_a_structured_output(example, module, extra):
    """Each starts its own simulated upstream, prints the router's decision for each of its three
    model calls (tool call, answer, structured output) and exits 0."""
    from tests.helpers import require_package

    require_package(module, extra)
    result = subprocess.run([sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    routes = [line for line in lines if line.startswith("  route: light (tier light, score ")]
    assert len(routes) == 3, result.stdout
    assert "answer: It is 22 C and sunny in Paris." in lines
    assert lines[-1] == "structured: Forecast(city='Paris', celsius=22)"
