"""llm-consortium's habits at `route`: its `consortium save` flags, its saved consortia imported
from a database llm-consortium 0.8 wrote itself (tests/data/llm_consortium_0.8.db), and
`route backend add` for the models they name. The real console script in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # subprocesses

DB = Path(__file__).parent / "data" / "llm_consortium_0.8.db"


def route(*args: str, cwd: Path, env: dict | None = None):
    full_env = {**os.environ, "PYTHONPATH": str(Path.cwd()), **(env or {})}
    full_env.pop("LLM_USER_PATH", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "router.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=full_env, timeout=60, stdin=subprocess.DEVNULL)


def _config_with_models(tmp_path: Path, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    """A `route init` config with mercury-2, then glm-5.2 and k2.6 added as a user would."""
    config = tmp_path / "my.yaml"
    assert route("init", "--backend", "mercury-2", "--path", str(config), cwd=tmp_path).returncode == 0
    for name in ("glm-5.2", "k2.6"):
        added = route("backend", "add", name, "--base-url", base_url, "-c", str(config), cwd=tmp_path)
        assert added.returncode == 0, added.stderr
    return config


def test_the_seeds_recipe_typed_with_llm_consortium_flags_builds_the_nested_consortium(tmp_path):
    config = _config_with_models(tmp_path)
    c = ("-c", str(config))
    recipe = [
        ["cns-glm", "-m", "glm-5.2", "-n", "5", "--arbiter", "mercury-2", "--judging-method", "rank"],
        ["cns-k26", "-m", "k2.6:5", "--arbiter", "mercury-2", "--judging-method", "rank"],
        ["cns-meta-glm-kimi", "-m", "cns-glm", "-m", "cns-k26", "--arbiter", "mercury-2",
         "--judging-method", "default", "--confidence-threshold", "80", "--max-iterations", "2",
         "--system", "Answer plainly."],
    ]
    for args in recipe:
        saved = route("consortium", "save", *args, *c, cwd=tmp_path)
        assert saved.returncode == 0, saved.stderr
    tree = json.loads(route("consortium", "show", "cns-meta-glm-kimi", "--json", *c, cwd=tmp_path).stdout)
    assert (tree["judging"], tree["arbiter"]["name"]) == ("synthesis", "mercury-2")  # llm-consortium's `default`
    inner = {m["name"]: (m["judging"], [(x["name"], x["samples"]) for x in m["members"]]) for m in tree["members"]}
    assert inner == {"cns-glm": ("rank", [("glm-5.2", 5)]), "cns-k26": ("rank", [("k2.6", 5)])}
    drawn = route("consortium", "show", "cns-meta-glm-kimi", *c, cwd=tmp_path).stdout
    assert "glm-5.2 ×5" in drawn and "k2.6 ×5" in drawn and "cns-glm" in drawn
    meta = json.loads(route("consortium", "list", "--json", *c, cwd=tmp_path).stdout)["consortia"][-1]
    assert meta["iterations"] == "1-2"
    assert "confidence_threshold: 0.8" in config.read_text() and "system: Answer plainly." in config.read_text()


def test_a_member_that_is_not_a_backend_yet_is_told_how_to_add_it_and_nothing_is_written(tmp_path):
    config = _config_with_models(tmp_path)
    before = config.read_text()
    refused = route("consortium", "save", "cns-q", "-m", "qwen-3", "-n", "3", "--arbiter", "mercury-2",
                    "-c", str(config), cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "'qwen-3' is neither a backend nor a consortium" in refused.stderr
    assert "route backend add qwen-3" in refused.stderr
    assert config.read_text() == before
    wrong = route("consortium", "save", "cns-q", "-m", "glm-5.2", "--arbiter", "mercury-2",
                  "--judging-method", "vote", "-c", str(config), cwd=tmp_path)
    assert wrong.returncode == 2 and "rank or synthesis" in wrong.stderr


def test_the_existing_flags_still_work_beside_llm_consortiums(tmp_path):
    config = _config_with_models(tmp_path)
    saved = route("consortium", "save", "cns-old", "--member", "glm-5.2*3", "--arbiter", "mercury-2",
                  "--judging", "synthesis", "--quorum", "2", "-c", str(config), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    row = json.loads(route("consortium", "list", "--json", "-c", str(config), cwd=tmp_path).stdout)["consortia"][0]
    assert (row["members"], row["judging"]) == (["glm-5.2*3"], "synthesis")


def test_import_reads_what_llm_consortium_0_8_saved_nested_ones_included(tmp_path, route_home):
    config = _config_with_models(tmp_path)
    llm_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "io.datasette.llm"  # where llm-consortium 0.8 keeps it
    llm_dir.mkdir(parents=True)
    shutil.copy(DB, llm_dir / "consortium_logs.db")
    imported = route("consortium", "import", "-c", str(config), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "cns-glm, cns-k26, cns-meta-glm-kimi" in imported.stderr
    tree = json.loads(route("consortium", "show", "cns-meta-glm-kimi", "--json", "-c", str(config), cwd=tmp_path).stdout)
    assert tree["judging"] == "synthesis" and [m["name"] for m in tree["members"]] == ["cns-glm", "cns-k26"]
    assert [(m["judging"], m["members"][0]["samples"]) for m in tree["members"]] == [("rank", 5), ("rank", 5)]
    text = config.read_text()
    assert "system: Answer plainly." in text and "# route: written by `route init`" in text  # comments kept
    # llm-consortium's default of 3 iterations over two nested panels plans (5+1)*3*2+1, three times:
    # more than our default budget, so the import writes what it plans, and says so
    deep = json.loads(route("consortium", "show", "cns-deep", "--json", "-c", str(config), cwd=tmp_path).stdout)
    assert (deep["worst_case_calls"], deep["budget"]) == (111, 111)
    assert "cns-deep: plans up to 111 model calls" in imported.stderr
    again = route("consortium", "import", "-c", str(config), cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr and config.read_text() == text


def test_import_from_llm_user_path_and_one_by_name(tmp_path):
    config = _config_with_models(tmp_path)
    llm_dir = tmp_path / "llm-home"
    llm_dir.mkdir()
    shutil.copy(DB, llm_dir / "consortium_logs.db")
    imported = route("consortium", "import", "cns-k26", "-c", str(config), "--json", cwd=tmp_path,
                     env={"LLM_USER_PATH": str(llm_dir)})
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == ["cns-k26"]
    missing = route("consortium", "import", "cns-nope", "--db", str(DB), "-c", str(config), cwd=tmp_path)
    assert missing.returncode == 2 and "cns-glm" in missing.stderr  # names what there is


def test_import_of_consortia_over_models_no_backend_serves_names_them_and_writes_nothing(tmp_path):
    config = tmp_path / "bare.yaml"
    assert route("init", "--backend", "sim", "--path", str(config), cwd=tmp_path).returncode == 0
    before = config.read_text()
    refused = route("consortium", "import", "--db", str(DB), "-c", str(config), cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "glm-5.2, k2.6, mercury-2" in refused.stderr and "route backend add" in refused.stderr
    assert config.read_text() == before
    nowhere = route("consortium", "import", "-c", str(config), cwd=tmp_path, env={"LLM_USER_PATH": str(tmp_path)})
    assert nowhere.returncode == 2 and "--db" in nowhere.stderr


def test_a_backend_added_to_an_existing_file_answers_and_the_file_keeps_its_comments(tmp_path, sim):
    config = tmp_path / "mine.yaml"
    original = ("# my notes\nbackends:\n    # the sim, mine\n    local:\n        kind: openai\n        model: sim-local\n"
                f"        base_url: {sim.base_url}\n\n# routing below\nrouting:\n    tiers:\n"
                "        - {name: all, backends: [local]}\n")
    config.write_text(original)
    added = route("backend", "add", "glm-5.2", "--base-url", sim.base_url, "-c", str(config), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    text = config.read_text()
    at = original.index("\n# routing below")  # after the last backend, before the blank line that ends them
    inserted = text[at:at + len(text) - len(original)]
    assert text == original[:at] + inserted + original[at:]  # everything else byte for byte
    assert inserted.startswith("    # added by `route backend add`\n    glm-5.2:\n        kind: openai\n")
    answered = route("-c", str(config), "-m", "glm-5.2", "--json", "hello", cwd=tmp_path)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["model"] == "glm-5.2"

    twice = route("backend", "add", "local", "--base-url", sim.base_url, "-c", str(config), cwd=tmp_path)
    assert twice.returncode == 2 and "already a backend named 'local'" in twice.stderr and config.read_text() == text
    provider = route("backend", "add", "groq", "-c", str(config), cwd=tmp_path, env={"GROQ_API_KEY": ""})
    assert provider.returncode == 0 and "api_key: ${GROQ_API_KEY}" in config.read_text()
    assert "GROQ_API_KEY is not set" in provider.stderr
    renamed = route("backend", "add", "kimi", "--from", "openrouter", "--model", "moonshotai/kimi-k2.6",
                    "-c", str(config), cwd=tmp_path)
    assert renamed.returncode == 0, renamed.stderr
    kimi = config.read_text().split("  kimi:\n")[1]
    assert "model: moonshotai/kimi-k2.6" in kimi and "price" not in kimi  # the block's price is another model's


def test_backend_add_needs_a_file_to_add_to_and_a_place_for_the_server(tmp_path):
    absent = route("backend", "add", "openrouter", "-c", str(tmp_path / "none.yaml"), cwd=tmp_path)
    assert absent.returncode == 2 and "route init --backend openrouter" in absent.stderr
    config = _config_with_models(tmp_path)
    nowhere = route("backend", "add", "mine", "-c", str(config), cwd=tmp_path)
    assert nowhere.returncode == 2 and "--base-url" in nowhere.stderr
    secret = route("backend", "add", "mine", "--base-url", "http://x/v1", "--api-key-env", "sk-live-123",
                   "-c", str(config), cwd=tmp_path)
    assert secret.returncode == 2 and "variable's name" in secret.stderr
    assert "sk-live-123" not in secret.stderr + config.read_text()  # a key typed there is never echoed
