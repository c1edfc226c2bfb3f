"""`route consortium save|list|show|remove` and `route -m CONSORTIUM`, run as a user would: the
real console script in a subprocess, stdout and stderr checked separately."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import use_arbiter

pytestmark = pytest.mark.integration  # subprocesses

ROUTE = [sys.executable, "-m", "router.cli"]


def route(*args: str, cwd: Path, env: dict | None = None):
    full_env = {**os.environ, "PYTHONPATH": str(Path.cwd()), **(env or {})}
    return subprocess.run([*ROUTE, *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_save_list_show_remove_round_trip(tmp_path, route_home):
    user_config = route_home / "config" / "config.yaml"
    saved = route("consortium", "save", "cns-x", "-m", "frontier*3", "-m", "diffusiongemma", "--arbiter", "mercury-2",
                  "--quorum", "2", cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    text = user_config.read_text()
    assert "cns-x:" in text and "frontier*3" in text
    assert "# route: which models exist" in text  # seeded from the shipped config, comments kept

    listed = route("consortium", "list", "--json", cwd=tmp_path)
    rows = {r["name"]: (r["members"], r["arbiter"]) for r in json.loads(listed.stdout)["consortia"]}
    assert rows["cns-x"] == (["frontier*3", "diffusiongemma"], "mercury-2")
    assert set(rows) == {"local-panel", "cns-x"}  # the shipped example is kept

    assert route("consortium", "save", "cns-y", "-m", "cns-x", "-m", "frontier", "--arbiter", "mercury-2",
                 "--judging", "synthesis", cwd=tmp_path).returncode == 0
    shown = route("consortium", "show", "cns-y", "--json", cwd=tmp_path)
    tree = json.loads(shown.stdout)
    assert tree["judging"] == "synthesis" and tree["members"][0]["members"][0]["samples"] == 3
    assert tree["calls_per_run"] == (3 + 1 + 1) + 1 + 1
    human = route("consortium", "show", "cns-y", cwd=tmp_path)
    assert "cns-x" in human.stdout and "frontier ×3" in human.stdout

    # A save that would make a cycle is refused, naming it; the file is unchanged.
    before = user_config.read_text()
    cycle = route("consortium", "save", "cns-x", "-m", "cns-y", "--arbiter", "mercury-2", "--force", cwd=tmp_path)
    assert cycle.returncode == 2 and "cns-x -> cns-y -> cns-x" in cycle.stderr and "Traceback" not in cycle.stderr
    assert user_config.read_text() == before
    exists = route("consortium", "save", "cns-x", "-m", "frontier", "--arbiter", "mercury-2", cwd=tmp_path)
    assert exists.returncode == 2 and "--force" in exists.stderr
    unknown = route("consortium", "save", "cns-z", "-m", "glm-5.2:5", "--arbiter", "mercury-2", cwd=tmp_path)
    assert unknown.returncode == 2 and "neither a backend nor a consortium" in unknown.stderr

    in_use = route("consortium", "remove", "cns-x", cwd=tmp_path)
    assert in_use.returncode == 2 and "used by cns-y" in in_use.stderr
    assert route("consortium", "remove", "cns-y", cwd=tmp_path).returncode == 0
    assert route("consortium", "remove", "cns-x", cwd=tmp_path).returncode == 0
    assert user_config.read_text() == Path("config.yaml").read_text()  # back to the seed, byte for byte
    names = [r["name"] for r in json.loads(route("consortium", "list", "--json", cwd=tmp_path).stdout)["consortia"]]
    assert names == ["local-panel"]


def _sim_config(tmp_path: Path, sim) -> Path:
    text = Path("examples/nested_consortium.yaml").read_text().replace("http://127.0.0.1:8000/v1", sim.base_url)
    path = tmp_path / "nested.yaml"
    path.write_text(text)
    return path


def test_ask_a_consortium_shows_members_live_and_json_has_the_trace(sim, tmp_path):
    for model in ("glm-5.2", "k2.6"):
        sim.update_profile(model, ttft_s=0.02, tokens_per_s=None)
    use_arbiter(sim)
    config = _sim_config(tmp_path, sim)
    shown = route("-c", str(config), "-m", "cns-glm", "Explain CRDTs.", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("[simulated glm-5.2]")
    assert "consortium cns-glm" in shown.stderr and "glm-5.2#5" in shown.stderr and "done" in shown.stderr

    as_json = route("-c", str(config), "-m", "cns-meta-glm-kimi", "--json", "Explain CRDTs.", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    trace = data["metadata"]["trace"]
    assert trace["consortium"] == "cns-meta-glm-kimi" and trace["calls"] == 13
    member = trace["rounds"][0]["members"][0]["trace"]["rounds"][0]["members"][0]
    assert {"text", "tokens", "cost_usd", "latency_s", "status"} <= set(member)
    assert data["usage"]["output_tokens"] == trace["usage"]["output_tokens"] > 0


def test_ask_a_consortium_whose_members_all_fail_exits_3_with_a_message(sim, tmp_path):
    sim.update_profile("glm-5.2", fault="500")
    config = _sim_config(tmp_path, sim)
    failed = route("-c", str(config), "-m", "cns-glm", "hi", cwd=tmp_path)
    assert failed.returncode == 3 and failed.stdout == ""
    assert "all 5 member calls failed" in failed.stderr and "Traceback" not in failed.stderr


def test_save_into_a_broken_user_config_reports_its_line_and_changes_nothing(tmp_path, route_home):
    user_config = route_home / "config" / "config.yaml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("backends:\n  a: {kind: openai, model: a\n")
    result = route("consortium", "save", "cns", "-m", "a*2", "--arbiter", "a", cwd=tmp_path)
    assert result.returncode == 2 and "config.yaml:" in result.stderr and "Traceback" not in result.stderr
    assert user_config.read_text() == "backends:\n  a: {kind: openai, model: a\n"
