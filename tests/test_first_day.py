"""What a user of llm, llm-consortium or LiteLLM meets on the first day with `route`, each once a
betrayal (issue 49): a busy port for `route sim`, an Anthropic base URL without /v1, a provider
block alone in a file, a misnamed key variable, a simulator keyed by a backend's name, tok/s of
an unstreamed call. Real processes, sockets and servers; nothing of ours is mocked."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from router import Simulator

pytestmark = pytest.mark.integration  # subprocesses and loopback servers

ROUTE = [sys.executable, "-m", "router.cli"]


def route(*args: str, cwd: Path, env: dict | None = None, timeout: float = 60):
    full_env = {**os.environ, "PYTHONPATH": str(Path.cwd()), **(env or {})}
    return subprocess.run([*ROUTE, *args], capture_output=True, text=True, cwd=cwd, env=full_env,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_route_sim_on_a_busy_port_is_a_usage_error_like_route_serve(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = route("sim", "--port", port, cwd=tmp_path)
        served = route("serve", "--port", port, cwd=tmp_path)
    assert result.returncode == 2 == served.returncode, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr and "startup complete" not in result.stderr
    assert "SIMULATED model server on" not in result.stderr  # nothing claims to serve


def test_a_python_simulator_keyed_by_a_backend_name_warns_as_the_cli_does():
    with Simulator({"diffusiongemma": {"ttft_s": 0.01}}) as sim:
        with pytest.warns(UserWarning, match="profile 'diffusiongemma' is a backend's name.*"
                                             "'google/diffusiongemma-26B-A4B-it'"):
            sim.config()
        with pytest.warns(UserWarning, match="fault 'frontier' is a backend's name"):
            sim.set_faults("frontier", ["500"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the right keys, and a name that is its own model, say nothing
            sim.set_faults("claude-sonnet-4-5", [None])
            sim.script("mercury-2", ["fine"])
            sim.update_profile("google/diffusiongemma-26B-A4B-it", ttft_s=0.0)


@pytest.mark.parametrize("base", ["root", "root/", "v1", "env"])
def test_an_anthropic_base_url_with_or_without_v1_answers(sim, monkeypatch, base):
    from router import Router

    sim.script("claude-sonnet-4-5", ["Hi from Claude."])
    url = {"root": sim.url, "root/": sim.url + "/", "v1": sim.base_url,
           "env": "http://127.0.0.1:${SIM_PORT}"}[base]  # resolved per call; as ANTHROPIC_BASE_URL is, no /v1
    monkeypatch.setenv("SIM_PORT", str(sim.port))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-placeholder")
    config = {"backends": {"frontier": {"kind": "anthropic", "model": "claude-sonnet-4-5", "base_url": url,
                                        "api_key": "${ANTHROPIC_API_KEY}"}},
              "routing": {"tiers": [{"name": "only", "backends": ["frontier"]}]}}
    with Router.from_config(config) as router:
        assert router.complete("hello", model="frontier").text == "Hi from Claude."
