"""The CLI as a newcomer meets it (issue 12): one test per sharp edge, run through the installed
`route` console script in a subprocess, as a user would; stdout and stderr checked apart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import PaidUpstream, cli_config
from tests.ports import refusing_port

pytestmark = pytest.mark.integration

ROUTE = str(Path(sys.executable).parent / "route")


def _default_sigint() -> None:
    """In the child: Ctrl-C as in a terminal, even when the test run itself was started in the
    background (which makes the shell ignore SIGINT for it and everything it starts)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


ROOT = Path(__file__).resolve().parent.parent


def route(*args: str, input: str | None = None, env: dict | None = None, cwd: Path | None = None):
    full_env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "INCEPTION_API_KEY")}
    full_env.update(env or {})
    return subprocess.run([ROUTE, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=60,
                          input=input, stdin=subprocess.DEVNULL if input is None else None)


def _nested(tmp_path: Path, sim) -> Path:
    text = (ROOT / "examples/nested_consortium.yaml").read_text().replace("http://127.0.0.1:8000/v1", sim.base_url)
    path = tmp_path / "nested.yaml"
    path.write_text(text)
    return path


def _requests(sim) -> int:
    return sum(s["requests"] for s in sim.stats().values())


def _logged(cfg: Path) -> list[dict]:
    shown = route("log", "--json", "-n", "100", "-c", str(cfg))
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


# -- 1. an option before a subcommand, or a typo, never becomes a paid prompt -------------------


def test_option_before_a_subcommand_runs_the_subcommand(sim, tmp_path):
    cfg = cli_config(tmp_path, sim.base_url)
    listed = route("-c", str(cfg), "models")
    assert listed.returncode == 0, listed.stderr
    assert "local" in listed.stdout and "hosted" in listed.stdout
    shown = route("-c", str(_nested(tmp_path, sim)), "consortium", "show", "cns-meta-glm-kimi")
    assert shown.returncode == 0, shown.stderr
    assert "cns-glm" in shown.stdout
    as_json = route("--json", "-c", str(cfg), "models")
    assert [b["name"] for b in json.loads(as_json.stdout)["backends"]] == ["local", "hosted"]
    assert _requests(sim) == 0


@pytest.mark.parametrize("args, suggestion", [
    (["modles"], "route models"),
    (["stat"], "route stats"),
    (["-q", "doctr"], "route doctor"),
    (["-m", "local", "models"], "route models"),
])
def test_a_command_word_or_a_typo_is_never_sent(sim, tmp_path, args, suggestion):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert suggestion in result.stderr and "route ask" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert _requests(sim) == 0


@pytest.mark.parametrize("args", [["ask", "models"], ["--", "models"], ["-q", "--", "models"]])
def test_a_command_word_is_sent_when_asked_for_deliberately(sim, tmp_path, args):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[simulated sim-local]") and "models" in result.stdout


def test_ordinary_short_prompts_still_go_through(sim, tmp_path):
    for prompt in ("hi", "ok", "hello"):
        result = route("-c", str(cli_config(tmp_path, sim.base_url)), "-q", prompt)
        assert result.returncode == 0, (prompt, result.stderr)


def test_global_options_work_after_the_subcommand_and_the_prompt(sim, tmp_path):
    cfg = str(cli_config(tmp_path, sim.base_url))
    answered = route("What is 2+2?", "--json", "-c", cfg)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["backend"] == "local"
    quiet = route("--no-log", "What is 2+2?", "-q", "-c", cfg)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert len(_logged(Path(cfg))) == 1  # --no-log, given first, kept the second out
    for command in (["models"], ["stats"], ["log"], ["consortium", "list"], ["doctor"]):
        result = route(*command, "-q", "--json", "-c", cfg)
        assert result.returncode == 0, (command, result.stderr)
        assert isinstance(json.loads(result.stdout.splitlines()[0]), dict), (command, result.stdout)


# -- 2. stdin beside a prompt argument ---------------------------------------------------------


def test_stdin_is_added_after_the_prompt_argument(sim, tmp_path):
    cfg = str(cli_config(tmp_path, sim.base_url))
    diff = "--- a/x.py\n+++ b/x.py\n" + "+print('changed')\n" * 40
    alone = json.loads(route("--json", "-c", cfg, "Summarise this diff").stdout)
    both = route("--json", "-c", cfg, "Summarise this diff", input=diff)
    assert both.returncode == 0, both.stderr
    doc = json.loads(both.stdout)
    assert doc["usage"]["input_tokens"] > alone["usage"]["input_tokens"] + 40
    assert doc["decision"]["tier"] == "strong"  # the length scorer saw the diff too
    prompt = _logged(Path(cfg))[0]["prompt"]
    assert prompt.startswith("Summarise this diff\n\n--- a/x.py") and prompt.endswith("+print('changed')\n")


# -- 3. blank prompts ------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
def test_blank_prompts_are_refused(sim, tmp_path, prompt):
    cfg = cli_config(tmp_path, sim.base_url)
    result = route("-c", str(cfg), prompt)
    assert result.returncode == 2 and "empty" in result.stderr and "Traceback" not in result.stderr
    assert _requests(sim) == 0 and _logged(cfg) == []


# -- 4. Ctrl-C ---------------------------------------------------------------------------------


def _interrupt(args: list[str], sim, models: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "INCEPTION_API_KEY")}
    proc = subprocess.Popen([ROUTE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 30
    while sum(sim.stats(m)["in_flight"] for m in models) == 0:  # every wait is on an event, not a margin
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _all_cancelled(sim, models: list[str]) -> None:
    deadline = time.monotonic() + 10
    while any(sim.stats(m)["in_flight"] for m in models):  # the server sees the disconnects a moment later
        assert time.monotonic() < deadline, sim.stats()
        time.sleep(0.02)
    assert sum(sim.stats(m)["cancelled"] for m in models) >= 1
    assert sum(sim.stats(m)["completed"] for m in models) == 0


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_ctrl_c_on_one_backend_is_one_line_exit_130_logged_cancelled(sim, tmp_path, stream):
    sim.update_profile("sim-local", ttft_s=60)
    cfg = cli_config(tmp_path, sim.base_url)
    result = _interrupt(["-c", str(cfg), stream, "hello"], sim, ["sim-local"])
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if "cancelled" in line.lower()] == ["route: cancelled"]
    assert len(result.stderr.splitlines()) <= 2  # the decision line, then the one line
    _all_cancelled(sim, ["sim-local"])
    assert [(r["status"], r["source"]) for r in _logged(cfg)] == [("cancelled", "cli")]


def test_ctrl_c_on_a_nested_consortium_cancels_every_call(sim, tmp_path):
    for model in ("glm-5.2", "k2.6"):
        sim.update_profile(model, ttft_s=60)
    cfg = _nested(tmp_path, sim)
    result = _interrupt(["-c", str(cfg), "-m", "cns-meta-glm-kimi", "Explain CRDTs"], sim, ["glm-5.2", "k2.6"])
    assert result.returncode == 130
    assert "Traceback" not in result.stderr and "aclose()" not in result.stderr
    assert result.stderr.rstrip().endswith("route: cancelled")
    assert result.stderr.count("route: cancelled") == 1
    _all_cancelled(sim, ["glm-5.2", "k2.6", "mercury-2"])
    assert [r["status"] for r in _logged(cfg)] == ["cancelled"]


# -- 5. scoring commands: bad input is exit 2, never a traceback --------------------------------


@pytest.mark.parametrize("args, stdin, message", [
    (["score"], "x\n", "stdin line 1 is not JSON"),
    (["eval", "/nope.jsonl"], None, "no such file"),
    (["calibrate", "/nope.jsonl", "--out", "w.json"], None, "no such file"),
    (["score", "--weights", "/nope.json"], "", "could not read the weights file"),
])
def test_scoring_commands_refuse_bad_input_with_exit_2(tmp_path, args, stdin, message):
    result = route(*args, input=stdin, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_eval_plot_without_matplotlib_is_a_usage_error(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "prompt": "p" * i, "local": i % 2, "hosted": 1}) + "\n"
                            for i in range(1, 9)))
    blocker = tmp_path / "nomatplotlib"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('matplotlib is hidden by this test')\n")
    result = route("eval", str(data), "--plot", str(tmp_path / "p.png"), env={"PYTHONPATH": str(blocker)})
    assert result.returncode == 2, result.stderr
    assert "--plot needs matplotlib" in result.stderr and "Traceback" not in result.stderr


def test_calibrate_summary_is_readable_not_a_raw_dict(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "prompt": ("why " * (i % 7)) + "x" * i,
                                        "local": float(i % 3 == 0), "hosted": 1.0}) + "\n" for i in range(60)))
    result = route("calibrate", str(data), "--out", str(tmp_path / "w.json"), "--threshold-only")
    assert result.returncode == 0, result.stderr
    assert "'out'" not in result.stderr and "threshold" in result.stderr
    as_json = route("calibrate", str(data), "--out", str(tmp_path / "w.json"), "--threshold-only", "--json")
    assert json.loads(as_json.stdout)["out"] == str(tmp_path / "w.json")


# -- 6. reasons that say what happened ---------------------------------------------------------


def test_prefer_best_without_a_deadline_does_not_mention_one(sim, tmp_path):
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "--explain", "--json", "--prefer", "best", "hello")
    reason = json.loads(result.stdout)["reason"]
    assert "deadline" not in reason, reason


def test_a_one_tier_config_does_not_talk_of_other_bands(sim, tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(f"backends:\n  a: {{kind: openai, model: m, base_url: '{sim.base_url}'}}\n"
                    "routing:\n  tiers: [{name: only, backends: [a]}]\n")
    reason = json.loads(route("-c", str(path), "--explain", "--json", "hello").stdout)["reason"]
    assert "other band" not in reason and "only" in reason, reason


def test_a_deadline_timeout_is_not_told_to_connect_a_model(sim, tmp_path):
    sim.update_profile("sim-local", ttft_s=5)
    sim.update_profile("sim-hosted", ttft_s=5)
    result = route("-c", str(cli_config(tmp_path, sim.base_url)), "--deadline", "200ms", "hello")
    assert result.returncode == 3
    assert "deadline" in result.stderr and "route sim" not in result.stderr


# -- 7. silent downgrades ----------------------------------------------------------------------


def _arbiter_down(tmp_path: Path, sim) -> Path:
    path = tmp_path / "cns.yaml"
    path.write_text(textwrap.dedent(f"""\
        backends:
          a: {{kind: openai, model: a, base_url: "{sim.base_url}"}}
          judge: {{kind: openai, model: judge, base_url: "http://127.0.0.1:9/v1", max_retries: 0}}
        routing:
          tiers: [{{name: all, backends: [a]}}]
        consortia:
          cns: {{members: ["a*2"], arbiter: judge, retries: 0}}
        """))
    return path


def test_a_failed_arbiter_is_visible_in_quiet_json_and_doctor(sim, tmp_path):
    cfg = _arbiter_down(tmp_path, sim)
    quiet = route("-c", str(cfg), "-q", "-m", "cns", "hello")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("[simulated a]")
    warnings = quiet.stderr.strip().splitlines()
    assert len(warnings) == 1 and "degraded" in warnings[0] and "arbiter" in warnings[0], quiet.stderr
    doc = json.loads(route("-c", str(cfg), "--json", "-m", "cns", "hello").stdout)
    assert doc["degraded"] and "judge" in doc["degraded"][0]
    doctor = route("doctor", "-c", str(cfg))
    assert doctor.returncode == 3 and "cns" in doctor.stdout


def test_doctor_flags_a_consortium_whose_arbiter_has_no_key(tmp_path):
    result = route("doctor", "--json", "--timeout", "0.2", cwd=tmp_path)
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert "local-panel" in checks and not checks["local-panel"]["ok"]
    assert "INCEPTION_API_KEY" in checks["local-panel"]["detail"]


def test_no_scorer_means_the_shipped_learned_scorer(sim, tmp_path):
    path = tmp_path / "noscorer.yaml"
    path.write_text(f"backends:\n  a: {{kind: openai, model: m, base_url: '{sim.base_url}'}}\n"
                    "routing:\n  tiers: [{name: only, backends: [a]}]\n")
    doc = json.loads(route("-c", str(path), "--explain", "--json", "Prove there are infinitely many primes").stdout)
    assert doc["scorer"] != "length", doc


# -- 9. the smaller ones -----------------------------------------------------------------------


def test_log_status_must_be_a_known_one(tmp_path):
    result = route("log", "--status", "weird", cwd=tmp_path)
    assert result.returncode == 2 and "ok, error or cancelled" in result.stderr


def test_an_unknown_model_gets_a_did_you_mean(tmp_path):
    result = route("-m", "diffusiongema", "--explain", "hello", cwd=tmp_path)
    assert result.returncode == 2 and "Did you mean 'diffusiongemma'" in result.stderr


def test_consortium_save_with_zero_samples_is_one_plain_paragraph(tmp_path):
    result = route("consortium", "save", "x", "-m", "frontier*0", "--arbiter", "mercury-2", cwd=tmp_path)
    assert result.returncode == 2
    assert "pydantic" not in result.stderr and "http" not in result.stderr and "Traceback" not in result.stderr
    assert "frontier*0" in result.stderr


def test_unknown_member_error_does_not_cite_a_file_that_does_not_exist(tmp_path, route_home):
    result = route("consortium", "save", "x", "-m", "nope", "--arbiter", "mercury-2", cwd=tmp_path)
    assert result.returncode == 2 and "neither a backend nor a consortium" in result.stderr
    user_config = route_home / "config" / "config.yaml"
    assert not user_config.exists() and f"{user_config}:" not in result.stderr


@pytest.mark.parametrize("command", [["models"], ["--explain", "hello"], ["consortium", "list"]])
def test_tables_fit_80_columns(tmp_path, command):
    result = route(*command, cwd=tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80, result.stdout
    assert "diffusiongemma" in result.stdout  # abbreviated elsewhere, never the names


def test_log_and_stats_tables_fit_80_columns_with_every_column(sim, tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(f"backends:\n  a-rather-long-backend-name: {{kind: openai, model: m, base_url: '{sim.base_url}'}}\n"
                    "routing:\n  tiers: [{name: only, backends: [a-rather-long-backend-name]}]\n")
    assert route("-c", str(path), "-q", "Explain CRDTs in five lines, with an example of each kind").returncode == 0
    for command, header in ((["log"], ["id", "time", "backend", "status", "tok", "s", "$", "prompt"]),
                            (["stats"], ["backend", "reqs", "share", "p50 s", "p95 s", "ttft s", "tok/s", "$", "errors"])):
        result = route(*command, "-c", str(path), env={"COLUMNS": "80"})
        lines = result.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, result.stdout
        assert lines[1].split() == " ".join(header).split(), result.stdout  # no header cut or dropped
        assert "a-rather-long" in result.stdout  # wrapped if need be, never cut


# -- 10. what users expect -------------------------------------------------------------------


def test_version():
    from router import __version__

    result = route("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"route {__version__}"
    assert __version__ == "0.1.0"


def test_shell_completion_script():
    # The shell is detected from the parent process, as when a user types it (`; true`: no exec).
    result = subprocess.run(["bash", "-c", f"'{ROUTE}' --show-completion; true"], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 0 and "complete " in result.stdout, result.stderr
    assert "_ROUTE_COMPLETE" in result.stdout
    complete = subprocess.run([ROUTE], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
                              env={**os.environ, "_ROUTE_COMPLETE": "complete_bash", "COMP_WORDS": "route -q con",
                                   "COMP_CWORD": "2"})
    assert "consortium" in complete.stdout and "config" in complete.stdout


def test_init_writes_a_starter_config_non_interactively(tmp_path, route_home):
    result = route("init", "--backend", "sim", "--backend", "frontier", "--yes", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    path = route_home / "config" / "config.yaml"
    assert str(path) in result.stderr
    shown = route("config", "show", "--json", cwd=tmp_path)
    doc = json.loads(shown.stdout)
    assert doc["path"] == str(path) and set(doc["config"]["backends"]) == {"sim", "frontier"}
    again = route("init", "--backend", "sim", "--yes", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    explained = route("--explain", "--json", "hello", cwd=tmp_path)
    assert explained.returncode == 0, explained.stderr


def test_init_asks_which_backends(tmp_path, route_home):
    result = route("init", input="y\nn\nn\nn\n\n", cwd=tmp_path)  # the last: no provider added
    assert result.returncode == 0, result.stderr
    text = (route_home / "config" / "config.yaml").read_text()
    assert "diffusiongemma" in text and "frontier" not in text


def test_config_path_and_show(tmp_path, route_home):
    path = route("config", "path", cwd=tmp_path)
    assert path.returncode == 0 and path.stdout.strip() == "(embedded default)"
    assert str(route_home / "config" / "config.yaml") in path.stderr
    shown = route("config", "show", cwd=tmp_path)
    assert shown.returncode == 0 and "diffusiongemma:" in shown.stdout and "# route:" in shown.stdout


def test_log_show_one_request_in_full(sim, tmp_path):
    cfg = cli_config(tmp_path, sim.base_url)
    assert route("-c", str(cfg), "-q", "What is 2+2?").returncode == 0
    row = _logged(cfg)[0]
    shown = route("log", "show", str(row["id"]), "-c", str(cfg))
    assert shown.returncode == 0, shown.stderr
    assert row["answer"] in shown.stdout and "What is 2+2?" in shown.stdout and "local" in shown.stdout
    as_json = json.loads(route("log", "show", str(row["id"]), "--json", "-c", str(cfg)).stdout)
    assert as_json["id"] == row["id"] and as_json["decision"]["chosen"] == "local"
    missing = route("log", "show", "999999", "-c", str(cfg))
    assert missing.returncode == 2 and "no request 999999" in missing.stderr


def test_stats_shows_total_spend_and_a_cap_stops_spending(answering, tmp_path):
    paid = PaidUpstream()  # real answers: a simulated one's cost is shown, never spent
    cfg = cli_config(tmp_path, answering(paid))
    assert route("-c", str(cfg), "-q", "-m", "hosted", "What is 2+2?").returncode == 0
    doc = json.loads(route("stats", "--json", "-c", str(cfg)).stdout)
    assert doc["total_cost_usd"] > 0, doc
    human = route("stats", "-c", str(cfg))
    assert "total" in human.stdout and "$" in human.stdout
    capped = cli_config(tmp_path, answering(paid), "spend:\n  cap_usd: 0.000001\n")
    refused = route("-c", str(capped), "-m", "hosted", "What is 2+2?")
    assert refused.returncode == 2 and "spend cap" in refused.stderr
    assert len(paid.bodies) == 1


def test_consortium_save_into_a_given_file(tmp_path, route_home):
    target = tmp_path / "mine.yaml"
    target.write_text((ROOT / "examples/nested_consortium.yaml").read_text())
    saved = route("consortium", "save", "cns-glm3", "-m", "glm-5.2*3", "--arbiter", "mercury-2", "-c", str(target))
    assert saved.returncode == 0, saved.stderr
    assert "cns-glm3:" in target.read_text() and not (route_home / "config" / "config.yaml").exists()
    shown = route("-c", str(target), "consortium", "show", "cns-glm3", "--json")
    assert json.loads(shown.stdout)["calls_per_run"] == 4


def test_license_file_matches_pyproject():
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()


# -- 8. litellm connection failures are not "server errors" -----------------------------------


def test_a_litellm_backend_that_cannot_connect_says_so(tmp_path):
    with refusing_port() as port:
        path = tmp_path / "lite.yaml"
        path.write_text(f"backends:\n  f: {{kind: litellm, model: anthropic/claude-sonnet-4-5, max_retries: 0, "
                        f"base_url: 'http://127.0.0.1:{port}', api_key: '${{DUMMY_KEY}}'}}\n"
                        "routing:\n  tiers: [{name: t, backends: [f]}]\n")
        result = route("-c", str(path), "--no-log", "hello", env={"DUMMY_KEY": "x", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert result.returncode == 3
    assert "cannot connect" in result.stderr and "HTTP 500" not in result.stderr and "server error" not in result.stderr


# -- 9. engine serve gives no advice it has no option for ------------------------------------


@pytest.mark.torch
def test_engine_serve_takes_the_canvas_length_from_the_checkpoint(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from backends.diffusion.tiny import build_tiny_checkpoint

    model = build_tiny_checkpoint(tmp_path / "tiny")
    proc = subprocess.Popen([ROUTE, "engine", "serve", "--model", str(model), "--port", "0", "--device", "cpu"],
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, "COLUMNS": "300"}, preexec_fn=_default_sigint)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if "serving" in line:
                break
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    text = "".join(seen)
    assert "serving" in text and "canvas 16" in text, text
    assert "set canvas_length" not in text


def test_init_names_each_model_as_the_shipped_config_does():
    """`route init` once wrote DiffusionGemma's id in lower case, which a strict server (vLLM)
    does not serve: each starter block names its model as config.yaml does."""
    import yaml

    from router.cli.starter import CHOICES

    shipped = yaml.safe_load((ROOT / "config.yaml").read_text())["backends"]
    compared = 0
    for choice in CHOICES:
        for name, spec in yaml.safe_load(textwrap.dedent(choice.block)).items():
            if name in shipped:
                assert spec["model"] == shipped[name]["model"], name
                compared += 1
    assert compared >= 2
