"""The runnable examples run, and the example configs load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from router.config_loader import load_config

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
