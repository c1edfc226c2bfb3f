"""The first hour (issue 32): nothing traded or recorded silently, and none of the small betrayals
a newcomer met. Through the CLI as a user runs it (in process with typer's CliRunner, where no
real terminal or process is needed; one subprocess for the newcomer's own first downgrade)
against the simulated server, with no API keys set. stdout and stderr are checked apart."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from backends.types import Completion, Timings, Usage
from router.cli.app import app
from router.config_loader import _embedded_text, load_config
from router.consortium.simulated import arbiter_responder
from router.core import Router

pytestmark = pytest.mark.integration

ROUTE = str(Path(sys.executable).parent / "route")
KEYS = ("ANTHROPIC_API_KEY", "INCEPTION_API_KEY")
# Scored for the frontier tier by the shipped scorer (`route --explain` says 0.82).
HARD = ("Prove that there are infinitely many primes of the form 4k+3, and then derive a rigorous asymptotic "
        "bound on their density using Dirichlet's theorem, and explain each step formally.")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


def _invoke(*args: str, input: str | None = None, env: dict | None = None):
    return CliRunner().invoke(app, list(args), input=input, env=env)


def _route(*args: str) -> subprocess.CompletedProcess:
    """The console script, for what needs a real process (the request log is written as it ends)."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    return subprocess.run([ROUTE, *args], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=60)


def _shipped(tmp_path: Path, sim, extra: str = "", **replace: str) -> Path:
    """The shipped config, its local server moved to the simulator: what `route sim` on port 8000 gives."""
    text = _embedded_text().replace("http://127.0.0.1:8000/v1", sim.base_url)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "shipped.yaml"
    path.write_text(text + extra)
    return path


def _small(tmp_path: Path, sim, extra: str = "") -> Path:
    """Three backends on the simulator, one tier each, tried in this order."""
    path = tmp_path / "small.yaml"
    path.write_text(textwrap.dedent(f"""\
        backends:
          a: {{kind: openai, model: m-a, base_url: "{sim.base_url}", max_retries: 0}}
          b: {{kind: openai, model: m-b, base_url: "{sim.base_url}", max_retries: 0}}
          c: {{kind: openai, model: m-c, base_url: "{sim.base_url}", max_retries: 0}}
        routing:
          scorer: {{kind: length, threshold_chars: 100000}}
          tiers: [{{name: all, backends: [a, b, c]}}]
        """) + extra)
    return path


# -- 1. a weaker tier never answers silently ----------------------------------------------------


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "downgraded" in line]


def test_the_hard_prompt_downgrade_is_one_line_on_stderr_even_with_quiet(sim, tmp_path):
    """The newcomer's first hour: `route sim` running, no keys, a hard prompt; the real console script."""
    cfg = _shipped(tmp_path, sim)
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    for extra in ([], ["-q"]):
        result = subprocess.run([ROUTE, "-c", str(cfg), *extra, HARD], capture_output=True, text=True, env=env,
                                stdin=subprocess.DEVNULL, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("[simulated google/diffusiongemma") and "downgraded" not in result.stdout
        lines = _warnings(result.stderr)
        assert len(lines) == 1, result.stderr
        assert "frontier (AuthError) and mercury-2 (AuthError) failed" in lines[0]
        assert "diffusiongemma (tier 'local') answered instead of tier 'frontier'" in lines[0]
        if extra:
            assert result.stderr.splitlines() == lines  # -q keeps this line and nothing else


def test_the_downgrade_line_without_streaming_and_with_json(sim, tmp_path):
    cfg = str(_shipped(tmp_path, sim))
    plain = _invoke("-c", cfg, "--no-stream", HARD)
    assert plain.exit_code == 0, plain.stderr
    assert len(_warnings(plain.stderr)) == 1 and "DOWNGRADED" not in plain.stderr
    as_json = _invoke("-c", cfg, "--json", HARD)
    assert as_json.exit_code == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["downgraded"]["note"] in _warnings(as_json.stderr)[0]


def test_the_python_api_result_says_the_same(sim, tmp_path):
    with Router(load_config(str(_shipped(tmp_path, sim))), log=False) as router:
        result = router.complete(HARD)
        easy = router.complete("hi")
    assert result.backend == "diffusiongemma" and result.downgrade is not None
    assert result.downgrade_note == ("downgraded: frontier (AuthError) and mercury-2 (AuthError) failed, so "
                                     "diffusiongemma (tier 'local') answered instead of tier 'frontier'")
    assert result.as_dict()["downgraded"]["note"] == result.downgrade_note
    assert easy.downgrade is None and easy.downgrade_note is None and easy.as_dict()["downgraded"] is None


def test_a_planned_downgrade_says_why(sim, tmp_path):
    path = tmp_path / "planned.yaml"
    path.write_text(textwrap.dedent(f"""\
        backends:
          light: {{kind: openai, model: m-light, base_url: "{sim.base_url}"}}
          heavy: {{kind: openai, model: m-heavy, base_url: "{sim.base_url}", latency: {{ttft_ms: 3000, tokens_per_s: 20}}}}
        routing:
          scorer: {{kind: length, threshold_chars: 50}}
          tiers:
            - {{name: light, below: 0.5, backends: [light]}}
            - {{name: heavy, backends: [heavy], deadline_ms: 500, on_deadline_risk: downgrade}}
        """))
    result = _invoke("-c", str(path), "-q", HARD)
    assert result.exit_code == 0, result.stderr
    [line] = result.stderr.splitlines()
    assert "light (tier 'light') answered instead of tier 'heavy': no backend of tier 'heavy'" in line


# -- 4. the small betrayals ---------------------------------------------------------------------


def test_log_show_says_a_failed_request_has_no_answer_not_that_it_was_not_stored(tmp_path):
    cfg = tmp_path / "down.yaml"
    cfg.write_text("backends:\n  a: {kind: openai, model: m, base_url: 'http://127.0.0.1:9/v1', max_retries: 0}\n"
                   "routing:\n  tiers: [{name: all, backends: [a]}]\n")
    assert _route("-c", str(cfg), "hello").returncode == 3
    [row] = [json.loads(line) for line in _route("log", "--json", "-c", str(cfg)).stdout.splitlines()]
    shown = _route("log", "show", str(row["id"]), "-c", str(cfg))
    assert shown.returncode == 0, shown.stderr
    answer = shown.stdout.split("── answer ──", 1)[1]
    assert "not stored" not in answer and "the request failed" in answer


def test_log_show_still_says_not_stored_when_content_is_not_kept(sim, tmp_path):
    cfg = _small(tmp_path, sim, "log:\n  store_content: false\n")
    assert _route("-c", str(cfg), "-q", "hello").returncode == 0
    [row] = [json.loads(line) for line in _route("log", "--json", "-c", str(cfg)).stdout.splitlines()]
    shown = _route("log", "show", str(row["id"]), "-c", str(cfg))
    assert shown.stdout.split("── answer ──", 1)[1].strip() == "(not stored: log.store_content is false)"


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_a_deadline_failure_gives_one_reason_per_backend_tried_and_no_connect_hint(sim, tmp_path, stream):
    for model in ("m-a", "m-b", "m-c"):
        sim.update_profile(model, ttft_s=5)
    result = _invoke("-c", str(_small(tmp_path, sim)), stream, "--deadline", "200ms", "hello")
    assert result.exit_code == 3, result.stderr
    summary = re.search(r"no backend could answer \(tried ([^;)]*)(?:; the deadline passed before (.*) could be "
                        r"tried)?\)", result.stderr)
    assert summary is not None, result.stderr
    tried = summary.group(1).split(", ")
    reasons = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(reasons) == len(tried) and all(name in r for name, r in zip(tried, reasons)), result.stderr
    assert set(tried) | set((summary.group(2) or "").split(", ")) - {""} == {"a", "b", "c"}
    assert "vLLM" not in result.stderr and "route sim" not in result.stderr
    assert "--deadline" in result.stderr  # what would help: more time


def test_a_forced_frontier_without_its_key_is_told_the_key_not_route_sim(sim, tmp_path):
    result = _invoke("-c", str(_shipped(tmp_path, sim)), "-m", "frontier", "hello")
    assert result.exit_code == 3
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint:")]
    assert len(hints) == 1 and "export ANTHROPIC_API_KEY=" in hints[0], result.stderr
    assert "cannot stand in" in hints[0] and "in another terminal" not in result.stderr
    assert "vLLM" not in result.stderr


def test_an_unreachable_local_server_is_the_one_place_route_sim_is_offered(tmp_path):
    cfg = tmp_path / "down.yaml"
    cfg.write_text("backends:\n  a: {kind: openai, model: m, base_url: 'http://127.0.0.1:9/v1', max_retries: 0}\n"
                   "routing:\n  tiers: [{name: all, backends: [a]}]\n")
    result = _invoke("-c", str(cfg), "hello")
    assert result.exit_code == 3 and "`route sim --port 9`" in result.stderr, result.stderr


def test_doctor_writes_its_report_to_stdout(tmp_path):
    cfg = tmp_path / "down.yaml"
    cfg.write_text("backends:\n  a: {kind: openai, model: m, base_url: 'http://127.0.0.1:9/v1', max_retries: 0}\n"
                   "routing:\n  tiers: [{name: all, backends: [a]}]\n")
    result = _invoke("doctor", "-c", str(cfg), "--timeout", "2")
    assert result.exit_code == 3
    assert [line for line in result.stdout.splitlines() if "FAIL" in line][0].split()[:2] == ["FAIL", "a"]
    assert "FAIL" not in result.stderr and f"config: {cfg}" in result.stderr  # notes stay on stderr


def test_the_degraded_header_is_plain_ascii_written_on_purpose():
    from router.server.endpoint import _degraded_header

    completion = Completion(text="x", backend="c", model="m", finish_reason="stop", usage=Usage(),
                            timings=Timings(total_s=0.1), metadata={"degraded": [
                                "cns, round 1: arbiter judge failed (cannot connect → refused…); the answer is “unjudged”"]})
    [(name, value)] = _degraded_header(completion)
    assert name == b"x-route-degraded"
    assert value == b'1; cns, round 1: arbiter judge failed (cannot connect -> refused...); the answer is "unjudged"'
    long = dataclasses.replace(completion, metadata={"degraded": ["é" + "…" * 200]})
    [(_, cut)] = _degraded_header(long)
    assert len(cut) == 300 and cut.startswith(b"1; e...") and cut.endswith(b"...") and b"?" not in cut


def test_the_degraded_header_through_the_server_keeps_the_ellipsis_as_dots(sim):
    import httpx

    from router.server import RouteServer

    # The arbiter's error is longer than the 120 characters a loss keeps, so it is cut with "…".
    judge_url = "http://127.0.0.1:9/v1/" + "long-path-" * 10
    router = Router(load_config({
        "backends": {"glm": {"kind": "openai", "model": "glm-5.2", "base_url": sim.base_url},
                     "judge": {"kind": "openai", "model": "j", "base_url": judge_url, "max_retries": 0}},
        "routing": {"tiers": [{"name": "all", "backends": ["glm"]}]},
        "consortia": {"pair": {"members": ["glm*2"], "arbiter": "judge", "retries": 0}},
    }), source="server", log=False)
    with router, RouteServer(router) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", timeout=20,
                              json={"model": "pair", "messages": [{"role": "user", "content": "hi"}]})
    header = response.headers["x-route-degraded"]
    assert "…" in response.json()["route"]["degraded"][0]
    assert "...)" in header and "?" not in header, header


def _slow_synthesis(sim, tmp_path: Path) -> Path:
    """A synthesis whose arbiter streams the answer for a while: the answer starts long before
    the arbiter is done."""
    sim.update_profile("glm-5.2", ttft_s=0.02, tokens_per_s=None, answer_tokens=120)
    state = sim.app.state.sim
    state.profiles["mercury-2"] = dataclasses.replace(state.profile("mercury-2"), decoding="autoregressive",
                                                     ttft_s=0.02, tokens_per_s=300.0,
                                                     responder=arbiter_responder(confidence=0.9))
    path = tmp_path / "cns.yaml"
    path.write_text(textwrap.dedent(f"""\
        backends:
          glm-5.2: {{kind: openai, model: glm-5.2, base_url: "{sim.base_url}"}}
          mercury-2: {{kind: openai, model: mercury-2, base_url: "{sim.base_url}"}}
        routing:
          tiers: [{{name: all, backends: [glm-5.2]}}]
        consortia:
          cns: {{members: ["glm-5.2*2"], arbiter: mercury-2, judging: synthesis, max_iterations: 1}}
          ranked: {{members: ["glm-5.2*2"], arbiter: mercury-2, judging: rank, max_iterations: 1}}
        """))
    return path


def test_the_consortium_table_off_a_terminal_shows_every_final_state(sim, tmp_path):
    result = _invoke("-c", str(_slow_synthesis(sim, tmp_path)), "-m", "cns", "Explain CRDTs.")
    assert result.exit_code == 0, result.stderr
    [arbiter] = [line for line in result.stderr.splitlines() if "arbiter mercury-2" in line]
    assert " done " in arbiter and "running" not in result.stderr, result.stderr
    assert result.stderr.count("consortium cns ·") == 1  # one table, printed once
    table_end = result.stderr.index("arbiter mercury-2")
    assert table_end < result.stderr.index("SIMULATED")  # before the stats line


def test_the_arbiters_verdict_is_in_the_human_output(sim, tmp_path):
    cfg = str(_slow_synthesis(sim, tmp_path))
    synthesis = _invoke("-c", cfg, "-m", "cns", "Explain CRDTs.")
    [line] = [line for line in synthesis.stderr.splitlines() if line.startswith("verdict")]
    assert re.fullmatch(r"verdict cns: mercury-2 synthesized the answer from 2 answers, ranked glm-5\.2#\d > "
                        r"glm-5\.2#\d; confidence 0\.90", line), line
    ranked = _invoke("-c", cfg, "-m", "ranked", "Explain CRDTs.")
    doc_order = json.loads(_invoke("-c", cfg, "-m", "ranked", "--json", "Explain CRDTs.").stdout)
    [line] = [line for line in ranked.stderr.splitlines() if line.startswith("verdict")]
    assert line.startswith("verdict ranked: mercury-2 chose glm-5.2#") and "confidence 0.90" in line
    order = doc_order["metadata"]["trace"]["rounds"][-1]["arbiter"]["order"]
    assert " > ".join(order) in line  # the same arbiter, the same answers: the order --json has
    assert "verdict" not in _invoke("-c", cfg, "-m", "cns", "-q", "Explain CRDTs.").stderr


def test_top_level_help_shows_the_ask_options():
    result = _invoke("--help")
    assert result.exit_code == 0
    for option in ("-m, --model", "--explain", "--json", "--deadline", "--stream / --no-stream", "-q, --quiet",
                   "--prefer", "--watch", "--show-thinking"):
        assert option in result.stdout, option
    assert result.stdout.index("--deadline") < result.stdout.index("Commands:")


@pytest.mark.parametrize("answers", ["", "y\n"])
def test_init_without_answers_names_yes_and_backend(tmp_path, route_home, answers):
    result = _invoke("init", input=answers)
    assert result.exit_code == 2, result.output
    assert "--yes" in result.stderr and "--backend" in result.stderr and "not a terminal" in result.stderr
    assert "Aborted" not in result.output and "Traceback" not in result.output
    assert not (route_home / "config" / "config.yaml").exists()


def _tokens(text: str) -> list[str]:
    """Words, not the table's rules (box-drawing characters, U+2500 to U+257F)."""
    return [t for t in text.split() if not all("\u2500" <= ch <= "\u257f" for ch in t)]


def _pieces(token: str) -> list[str]:
    return re.findall(r"[^/-]+[/-]*|[/-]+", token)


def _cut_words(narrow: str, wide: str) -> list[str]:
    """Tokens of the 80-column output that are neither whole tokens of the wide one nor runs of
    its `/`- or `-`-delimited pieces: a word folded in the middle, or cut with an ellipsis."""
    whole = set(_tokens(wide))
    runs = {"".join(p[i:j]) for t in whole for p in [_pieces(t)] for i in range(len(p)) for j in range(i + 1, len(p) + 1)}
    return [t for t in _tokens(narrow) if t not in whole and t not in runs]


@pytest.mark.parametrize("command", [
    ["models"],
    ["--explain", HARD],
    ["--explain", "--deadline", "2s", "hello"],
])
def test_tables_at_80_columns_break_only_between_words(sim, tmp_path, monkeypatch, command):
    _shipped(tmp_path, sim, **{"hedge: false": "hedge: true"})
    monkeypatch.chdir(tmp_path)  # the models table's title names the config file: a short path, as in a project
    cfg = "shipped.yaml"
    narrow = _invoke("-c", cfg, *command, env={"COLUMNS": "80"})
    wide = _invoke("-c", cfg, *command, env={"COLUMNS": "300"})
    assert narrow.exit_code == wide.exit_code == 0, narrow.stderr
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80, narrow.stdout
    assert _cut_words(narrow.stdout, wide.stdout) == [], narrow.stdout
    for name in ("diffusiongemma", "mercury-2", "frontier"):
        assert name in _tokens(narrow.stdout)
