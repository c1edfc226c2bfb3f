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


def test_a_provider_block_alone_in_a_file_points_to_the_commands_that_make_a_config(tmp_path):
    from router.cli.starter import PROVIDERS

    block = next(c.block for c in PROVIDERS if c.name == "openrouter")
    alone = tmp_path / "openrouter.yaml"
    alone.write_text("backends:\n" + block)  # copied from docs/guide/providers.md into a file of its own
    result = route("-c", str(alone), "models", cwd=tmp_path)
    assert result.returncode == 2 and "required key 'routing' is missing" in result.stderr
    assert "route backend add NAME" in result.stderr and "route init --backend NAME" in result.stderr
    assert "Traceback" not in result.stderr
    unwrapped = tmp_path / "bare.yaml"
    unwrapped.write_text(block.replace("\n  ", "\n").lstrip())  # the block without `backends:` over it
    bare = route("-c", str(unwrapped), "models", cwd=tmp_path)
    assert bare.returncode == 2 and "it looks like a backend, which goes under `backends:`" in bare.stderr
    assert bare.stderr.count("route backend add NAME") == 1  # said once, not per problem
    # following the hint works
    made = route("init", "--backend", "openrouter", "--path", str(tmp_path / "made.yaml"), cwd=tmp_path)
    assert made.returncode == 0 and route("-c", str(tmp_path / "made.yaml"), "models", cwd=tmp_path).returncode == 0


def test_a_misnamed_key_variable_is_told_the_set_one_and_never_its_value(tmp_path):
    config = tmp_path / "k.yaml"
    config.write_text("backends:\n  openai: {kind: openai, model: gpt-5, base_url: 'http://127.0.0.1:9/v1', "
                      "api_key: '${OPENAI_APIKEY}'}\nrouting:\n  tiers: [{name: a, backends: [openai]}]\n")
    secret = "sk-proj-do-not-print-4242"
    env = {"OPENAI_API_KEY": secret, "OPENAI_APIKEY": ""}
    asked = route("-c", str(config), "--no-log", "hello", cwd=tmp_path, env=env)
    doctor = route("-c", str(config), "doctor", cwd=tmp_path, env=env)
    models = route("-c", str(config), "models", cwd=tmp_path, env=env)
    assert asked.returncode == 3 and "but $OPENAI_API_KEY is" in asked.stderr
    assert "write `api_key: ${OPENAI_API_KEY}`" in asked.stderr
    assert "$OPENAI_API_KEY is set, though" in doctor.stdout + doctor.stderr
    assert "$OPENAI_API_KEY is set, though" in models.stdout
    for result in (asked, doctor, models):
        assert secret not in result.stdout + result.stderr
    # with nothing alike set, the hint is the plain one
    plain = route("-c", str(config), "--no-log", "hello", cwd=tmp_path, env={"OPENAI_API_KEY": "", "OPENAI_APIKEY": ""})
    assert "needs an API key: `export OPENAI_APIKEY=...`" in plain.stderr and "is set, though" not in plain.stderr


def test_a_lookalike_is_a_set_variable_of_the_same_letters_or_a_close_spelling(monkeypatch):
    from backends.env_names import set_lookalike

    for name in [n for n in os.environ if "API" in n.upper() or "KEY" in n.upper()]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    monkeypatch.setenv("EMPTY_API_KEY", "")
    assert set_lookalike("anthropic_apikey") == "ANTHROPIC_API_KEY"
    assert set_lookalike("ANTROPIC_API_KEY") == "ANTHROPIC_API_KEY"  # one letter off
    assert set_lookalike("EMPTYAPIKEY") is None  # set but empty is no help
    assert set_lookalike("GROQ_API_KEY") is None


def test_route_stats_shows_no_decode_rate_for_answers_that_came_whole(tmp_path, route_home, sim):
    sim.update_profile("sim-whole", ttft_s=0.01, tokens_per_s=None)  # the answer in one piece
    sim.update_profile("sim-streamed", ttft_s=0.01, tokens_per_s=400.0)  # token by token
    config = tmp_path / "c.yaml"
    config.write_text("backends:\n"
                      f"  whole: {{kind: openai, model: sim-whole, base_url: '{sim.base_url}'}}\n"
                      f"  streamed: {{kind: openai, model: sim-streamed, base_url: '{sim.base_url}'}}\n"
                      "routing:\n  tiers: [{name: a, backends: [whole, streamed]}]\n")
    for backend in ("whole", "streamed"):
        asked = route("-c", str(config), "-m", backend, "Say a few words about rivers.", cwd=tmp_path)
        assert asked.returncode == 0, asked.stderr
    shown = route("-c", str(config), "stats", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    import json

    rates = {row["backend"]: row["tokens_per_s"] for row in json.loads(shown.stdout)["backends"]}
    assert rates["whole"] is None  # was 70798: tokens over the microseconds after the only piece
    assert rates["streamed"] is not None and rates["streamed"] > 0
