"""What the published DiffusionGemma needs, said the same way everywhere: its id and vLLM's recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.diffusion.info import PUBLISHED_ID, VLLM_FLAGS, vllm_advice, vllm_command

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_and_config_carry_every_vllm_flag():
    texts = {name: (ROOT / name).read_text() for name in
             ("README.md", "examples/vllm_diffusiongemma.sh", "config.yaml")}
    for name, text in texts.items():
        flat = " ".join(text.replace("\\\n", " ").split())
        for flag, _why in VLLM_FLAGS:
            assert flag in flat, f"{name} lacks {flag}"
        assert PUBLISHED_ID in text, name


def test_no_lowercase_model_id_is_left():
    stale = PUBLISHED_ID.lower()
    examples = [p for p in (ROOT / "examples").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in [*ROOT.glob("*.md"), *ROOT.glob("*.yaml"), *examples,
                 *(ROOT / "backends").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        assert stale not in path.read_text(), path


def test_a_local_directory_is_served_under_the_published_id():
    assert vllm_command() == ("vllm serve google/diffusiongemma-26B-A4B-it --max-num-seqs 4 "
                              "--generation-config vllm --gpu-memory-utilization 0.8")
    assert "--served-model-name google/diffusiongemma-26B-A4B-it" in vllm_command("/models/dg")
    assert len(vllm_advice()) == 1 + len(VLLM_FLAGS)


@pytest.mark.integration
def test_the_simulator_accepts_image_parts(sim):
    import httpx

    content = [{"type": "text", "text": "what is in this picture?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    body = {"model": PUBLISHED_ID, "messages": [{"role": "user", "content": content}]}
    response = httpx.post(f"{sim.base_url}/chat/completions", json=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


@pytest.mark.integration
def test_engine_serve_refuses_a_batch_of_zero():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "router.cli", "engine", "serve", "--model", "x", "--max-batch", "0"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2 and "--max-batch" in result.stderr
