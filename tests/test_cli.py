"""The `route` command: exit codes, stdout/stderr separation, JSON output, and start-up cost.

Most tests run the real console script in a subprocess, as a user would; stdout and stderr are
checked separately."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli_config
from tests.ports import refusing_port

pytestmark = pytest.mark.integration  # subprocesses and servers


ROUTE = [sys.executable, "-m", "router.cli"]


def route(*args: str, input: str | None = None, env: dict | None = None, cwd: Path | None = None):
    full_env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "INCEPTION_API_KEY")}
    full_env.update(env or {})
    # No input: stdin is /dev/null, as in a script (an inherited open pipe would be read as the prompt's tail).
    return subprocess.run([*ROUTE, *args], capture_output=True, text=True, input=input, env=full_env, cwd=cwd,
                          timeout=60, stdin=subprocess.DEVNULL if input is None else None)


def test_help_lists_commands_and_exit_codes():
    result = route("--help")
    assert result.returncode == 0
    for word in ("ask", "models", "doctor", "sim", "Exit codes"):
        assert word in result.stdout


def test_answer_streams_to_stdout_and_notes_go_to_stderr(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "What is 2+2?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[simulated sim-local]")
    assert "→ local" in result.stderr and "SIMULATED" in result.stderr
    assert "[simulated" not in result.stderr


def test_json_output_is_one_parseable_document(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "--json", "x" * 400)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["backend"] == "hosted" and doc["simulated"] is True
    assert doc["decision"]["tier"] == "strong" and doc["usage"]["output_tokens"] > 0
    assert doc["cost_usd"] > 0


def test_prompt_from_stdin(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "--no-stream", input="Tell me a joke\n")
    assert result.returncode == 0, result.stderr
    assert "Tell me a joke" in result.stdout  # the simulator echoes the prompt's start


def test_forced_model(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "-m", "hosted", "hi", "--json")
    assert json.loads(result.stdout)["backend"] == "hosted"


def test_explain_calls_no_model(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "--explain", "--json", "hi")
    assert result.returncode == 0
    assert json.loads(result.stdout)["chosen"] == "local"
    assert sim.stats().get("sim-local", {}).get("requests", 0) == 0


def test_no_reachable_backend_exits_3_with_what_was_tried_and_how_to_connect(tmp_path):
    result = route("-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")), "hello")
    assert result.returncode == 3
    assert "tried local, hosted" in result.stderr and "cannot connect" in result.stderr
    assert "route sim" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_shipped_default_without_keys_exits_3_and_names_the_missing_keys(tmp_path):
    from router.config_loader import _embedded_text

    # The shipped default, with its local server moved from port 8000 (where a real vLLM or a
    # `route sim` may listen) to a port held bound but not listening: connections are refused.
    with refusing_port() as port:
        shipped = tmp_path / "shipped.yaml"
        shipped.write_text(_embedded_text().replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
        assert f"127.0.0.1:{port}" in shipped.read_text()
        result = route("hello", cwd=tmp_path, env={"ROUTE_HOME": str(tmp_path / "home"), "ROUTE_CONFIG": str(shipped)})
    assert result.returncode == 3
    assert "ANTHROPIC_API_KEY" in result.stderr and "INCEPTION_API_KEY" in result.stderr
    assert "→ diffusiongemma" in result.stderr


def test_config_error_exits_2_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("backends:\n  a:\n    kind: openai\n    modle: x\nrouting:\n  tiers: [{name: t, backends: [a]}]\n")
    result = route("-c", str(bad), "hello")
    assert result.returncode == 2
    assert f"{bad}:4: unknown key 'modle'" in result.stderr and "Did you mean 'model'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["-m", "nope", "hi"], "unknown model 'nope'"),
    (["--deadline", "soon", "hi"], "--deadline 'soon' is not a duration"),
    (["--prefer", "free", "hi"], "prefer must be fast, cheap or best (got 'free')"),
    (["--temperature", "9", "hi"], "--temperature"),
])
def test_usage_errors_exit_2(sim, tmp_path, args, message):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_json_mode_errors_are_json_on_stdout(tmp_path):
    result = route("-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")), "--json", "-m", "nope", "hi")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["type"] == "UsageError"


def test_empty_stdin_is_a_usage_error(tmp_path, sim):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), input="   \n")
    assert result.returncode == 2 and "empty" in result.stderr


def test_models_json_never_shows_keys(tmp_path, sim):
    result = route("models", "--json", "-c", str(cli_config(tmp_path, sim.base_url)))
    doc = json.loads(result.stdout)
    assert [b["name"] for b in doc["backends"]] == ["local", "hosted"]


def test_models_reports_key_presence_not_value(tmp_path):
    result = route("models", "--json", env={"INCEPTION_API_KEY": "sk-very-secret"}, cwd=tmp_path)
    assert "sk-very-secret" not in result.stdout + result.stderr
    keys = {b["name"]: b["key"] for b in json.loads(result.stdout)["backends"]}
    assert keys["mercury-2"] == "set" and keys["frontier"] == "missing $ANTHROPIC_API_KEY"


def test_doctor_ok_against_the_simulator_and_failing_otherwise(sim, tmp_path):
    good = route("doctor", "-c", str(cli_config(tmp_path, sim.base_url)))
    assert good.returncode == 0, good.stderr
    assert "SIMULATED" in good.stdout
    bad = route("doctor", "-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")))
    assert bad.returncode == 3 and "cannot reach" in bad.stdout


@pytest.mark.parametrize("args", [["--help"], ["--explain", "hello world"]])
def test_fast_paths_do_not_import_heavy_libraries(args, tmp_path):
    code = (
        "import sys\nfrom router.cli.app import app\n"
        f"try:\n    app({args!r}, prog_name='route')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('litellm', 'torch', 'transformers', 'httpx', 'openai') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "ROUTE_HOME": str(tmp_path)})
    assert "HEAVY=\n" in result.stdout or result.stdout.rstrip().endswith("HEAVY="), result.stdout + result.stderr


def test_help_loads_no_backend_machinery(tmp_path):
    # every command module imports backends.errors for UsageError; the package's other names
    # (the Backend class and its pydantic schemas, a third of `route --help`'s time) load on use
    code = (
        "import sys\nfrom router.cli.app import app\n"
        "try:\n    app(['--help'], prog_name='route')\nexcept SystemExit:\n    pass\n"
        "print('LOADED=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('backends', 'pydantic'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "ROUTE_HOME": str(tmp_path)})  # fmt: skip
    assert result.stdout.strip().endswith("LOADED=backends,backends.errors"), result.stdout + result.stderr
    import backends

    assert backends.Backend is backends.base.Backend  # loaded on first use, then a plain attribute
    assert "Backend" in vars(backends) and "Backend" in dir(backends)
