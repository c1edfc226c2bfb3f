"""What the CLI and its pages promise a newcomer, and once did not keep (issue 39): the in-process
simulator standing in for every backend; a consortium whose arbiter failed said it "chose"; `route
log` named the last backend tried as if it had answered; `route --help` left out exit code 130;
`route init` offered three backends; a simulator profile keyed by a backend's name was silently
unused; `mkdocs serve` wanted `route sim`'s port. Through the real console script where a
process matters, against the simulator, with no API keys set."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from router import Router, Simulator
from router.cli.app import app
from router.cli.commands.sim import unasked_profiles
from router.cli.errors import EXIT_INTERRUPTED, EXIT_NO_BACKEND, EXIT_OK, EXIT_OUTPUT_CLOSED, EXIT_USAGE
from router.cli.verdicts import verdict_lines
from router.config_loader import load_config
from tests.ports import free_port, refusing_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
ROUTE = str(Path(sys.executable).parent / "route")
KEYS = ("ANTHROPIC_API_KEY", "INCEPTION_API_KEY")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


def _route(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([ROUTE, *args], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
                          input=input, stdin=subprocess.DEVNULL if input is None else None)


def test_the_simulator_in_process_answers_every_backend_of_the_shipped_config():
    with Simulator() as sim, Router.from_config(sim.config()) as router:
        routed = router.complete("Why is the sky blue?")
        hosted = router.complete("hi", model="frontier")
        panel = router.complete("Explain CRDTs in five lines", model="local-panel")
    assert routed.backend == "diffusiongemma" and routed.text.startswith("[simulated google/diffusiongemma")
    assert hosted.text.startswith("[simulated claude-sonnet-4-5]")
    arbiter = panel.completion.metadata["trace"]["rounds"][0]["arbiter"]
    assert arbiter["status"] == "done" and arbiter["fallback"] is None  # judged, by the simulated mercury-2


def test_the_simulator_config_points_each_server_kind_at_it_and_drops_keys():
    given = {"backends": {"a": {"kind": "openai", "model": "m", "base_url": "https://api.openai.com/v1",
                                "api_key": "${OPENAI_API_KEY}"},
                          "b": {"kind": "litellm", "model": "gemini/gemini-2.5-flash", "api_key": "${GEMINI_API_KEY}"},
                          "c": {"kind": "anthropic", "model": "claude-haiku-4-5", "api_key": "${ANTHROPIC_API_KEY}"}},
             "routing": {"tiers": [{"name": "all", "backends": ["a", "b", "c"]}]}}
    with Simulator() as sim:
        config = sim.config(given)
        with Router.from_config(config) as router:
            answers = {name: router.complete("hi", model=name).text for name in ("a", "b", "c")}
    assert {b["kind"] for b in config["backends"].values()} == {"openai", "anthropic"}
    assert all(b["base_url"] == sim.base_url and "api_key" not in b for b in config["backends"].values())
    assert answers["a"].startswith("[simulated m]") and answers["c"].startswith("[simulated claude-haiku-4-5]")
    assert answers["b"].startswith("[simulated gemini/gemini-2.5-flash]")
    assert given["backends"]["a"]["api_key"] == "${OPENAI_API_KEY}"  # the caller's dict is left as it was


def test_a_consortium_whose_arbiter_failed_is_never_said_to_have_chosen(tmp_path):
    """`local-panel` with only the simulator: mercury-2 has no key, so nobody judges."""
    with Simulator() as sim:
        config = yaml.safe_load((ROOT / "config.yaml").read_text())
        config["backends"]["diffusiongemma"]["base_url"] = sim.base_url
        with Router.from_config(config) as router:
            result = router.complete("Explain CRDTs in five lines", model="local-panel")
    lines = verdict_lines(result.completion.metadata["trace"])
    assert len(lines) == 1, lines
    assert lines[0].startswith("verdict local-panel: unjudged: arbiter mercury-2 failed (AuthError); diffusiongemma#")
    assert " chose " not in lines[0]


def test_route_log_says_none_answered_and_what_was_tried(tmp_path):
    with refusing_port() as port:
        config = tmp_path / "c.yaml"
        config.write_text((ROOT / "config.yaml").read_text().replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
        failed = _route("-c", str(config), "-q", "hello")
    assert failed.returncode == EXIT_NO_BACKEND, failed.stderr
    table = _route("-c", str(config), "log")
    assert "none (3 failed)" in table.stdout and "frontier" not in table.stdout, table.stdout
    shown = _route("-c", str(config), "log", "show", "1")
    assert ("none answered; tried diffusiongemma (Unreachable), mercury-2 (AuthError), frontier (AuthError)"
            in " ".join(shown.stdout.split())), shown.stdout


def test_route_help_names_every_exit_code():
    text = " ".join(CliRunner().invoke(app, ["--help"]).stdout.split())
    assert ("Exit codes: 0 ok, 2 usage or config error, 3 no backend could answer, 130 interrupted, 141 output "
            "closed early (`| head`)." in text), text
    assert (EXIT_OK, EXIT_USAGE, EXIT_NO_BACKEND, EXIT_INTERRUPTED, EXIT_OUTPUT_CLOSED) == (0, 2, 3, 130, 141)


def test_an_answer_whose_reader_went_away_ends_quietly_with_141(tmp_path):
    """`route "..." | head`: once head has its lines, route's next write meets a closed pipe. Here
    the pipe has no reader from the start, so the first write of the answer meets it."""
    with Simulator() as sim:
        config = tmp_path / "sim.yaml"
        config.write_text(yaml.safe_dump(sim.config()))
        reader, writer = os.pipe()
        os.close(reader)
        try:
            done = subprocess.run([ROUTE, "-c", str(config), "--no-log", "-m", "frontier", "hi"], stdout=writer,
                                  stderr=subprocess.PIPE, text=True, timeout=60, stdin=subprocess.DEVNULL)
        finally:
            os.close(writer)
    assert done.returncode == EXIT_OUTPUT_CLOSED, done.stderr
    assert "route: " not in done.stderr and "Traceback" not in done.stderr, done.stderr  # no error to show
    assert "frontier" in done.stderr  # the decision was shown as usual


def test_route_init_offers_every_provider_of_the_providers_page(tmp_path):
    from router.cli.starter import PROVIDERS

    page = (ROOT / "docs" / "guide" / "providers.md").read_text()
    for choice in PROVIDERS:
        assert f"```yaml\nbackends:\n{choice.block}```" in page, choice.name
    path = tmp_path / "all.yaml"
    names = [c.name for c in PROVIDERS]
    written = _route("init", "--path", str(path), *[arg for name in names for arg in ("--backend", name)])
    assert written.returncode == 0, written.stderr
    assert set(load_config(str(path)).config.backends) == set(names)
    asked = _route("init", "--path", str(tmp_path / "asked.yaml"), input="n\nn\nn\ny\nollama, groq\n")
    assert asked.returncode == 0, asked.stderr
    assert list(load_config(str(tmp_path / "asked.yaml")).config.backends) == ["sim", "groq", "ollama"]
    unknown = _route("init", "--path", str(tmp_path / "x.yaml"), input="n\nn\nn\ny\nolama\n")
    assert unknown.returncode == EXIT_USAGE and "'olama' is not one route init knows" in unknown.stderr


def test_a_profile_keyed_by_a_backend_name_is_named_with_the_model_to_use():
    backends = load_config(str(ROOT / "config.yaml")).config.backends
    notes = unasked_profiles(["diffusiongemma", "google/diffusiongemma-26B-A4B-it", "flaky-model"], backends)
    assert notes == [
        "profile 'diffusiongemma' is a backend's name; the simulator is sent its model: key the profile "
        "'google/diffusiongemma-26B-A4B-it'",
        "profile 'flaky-model' names no model the config in use sends (only a config of your own that names it "
        "will use it)"]


def test_route_sim_warns_before_serving(tmp_path):
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(textwrap.dedent("""\
        profiles:
          diffusiongemma: {ttft_s: 0.05}
        """))
    proc = subprocess.Popen([ROUTE, "sim", "--port", str(free_port()), "--profiles", str(profiles)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        before = []
        for line in proc.stderr:  # the server's own line comes once the warnings are out
            if "SIMULATED" in line:
                break
            before.append(line)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "route: warning: profile 'diffusiongemma' is a backend's name" in " ".join(" ".join(before).split())


def test_mkdocs_serve_takes_no_port_a_route_command_defaults_to():
    import typer.main

    dev_port = int(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["dev_addr"].rsplit(":", 1)[1])
    root = typer.main.get_command(app)
    defaults = set()
    for name in ("sim", "serve"):
        command = root.get_command(root.make_context("route", ["models"]), name)  # type: ignore[attr-defined]
        defaults |= {p.default for p in command.params if p.name == "port"}
    assert {8000, 4000} <= defaults and dev_port not in defaults
