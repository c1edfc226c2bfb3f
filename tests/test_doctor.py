"""`route doctor` reads each OpenAI-compatible server's /v1/models and names what it does serve.

vLLM serves exactly the name it was started with (`vllm serve google/diffusiongemma-26B-A4B-it`)
and answers any other with 404; the strict simulator does the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends.simulator import SimServer
from router.config import BackendConfig
from router.doctor import check_backend, not_served_hint

pytestmark = pytest.mark.integration

PUBLISHED = "google/diffusiongemma-26B-A4B-it"
SHOUTED = "GOOGLE/DIFFUSIONGEMMA-26B-A4B-IT"


@pytest.fixture(scope="module")
def strict_sim():
    with SimServer({SHOUTED: {"decoding": "diffusion", "canvas_s": 0.0}}, strict_models=True) as server:
        yield server


def _spec(base_url: str, model: str = PUBLISHED) -> BackendConfig:
    return BackendConfig(kind="openai", model=model, base_url=base_url)


def test_a_differently_cased_name_fails_with_a_did_you_mean(strict_sim):
    check = check_backend("diffusiongemma", _spec(strict_sim.base_url), timeout_s=5)
    assert not check.ok
    assert f"did you mean {SHOUTED!r}" in check.detail and PUBLISHED in check.detail


def test_the_served_name_passes(strict_sim):
    assert check_backend("diffusiongemma", _spec(strict_sim.base_url, SHOUTED), timeout_s=5).ok


def test_the_strict_simulator_answers_an_unknown_name_404_like_vllm(strict_sim):
    import httpx

    body = {"model": PUBLISHED, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{strict_sim.base_url}/chat/completions", json=body, timeout=5)
    assert response.status_code == 404
    assert response.json()["error"]["message"] == f"The model `{PUBLISHED}` does not exist."


def test_the_lenient_simulator_warns_but_passes(sim):
    check = check_backend("x", _spec(sim.base_url, "google/diffusiongemma-26b-a4b-it"), timeout_s=5)
    assert check.ok and f"did you mean {PUBLISHED!r}" in check.detail


def test_hint_falls_back_to_a_fuzzy_match_and_lists_every_name():
    hint = not_served_hint("mercury2", ["mercury-2", "gpt-5"])
    assert hint.startswith("did you mean 'mercury-2'?") and "mercury-2, gpt-5" in hint
    assert "did you mean" not in not_served_hint("llama", ["gpt-5"])


def test_route_doctor_exits_3_and_names_the_served_model(strict_sim, tmp_path: Path):
    config = tmp_path / "cfg.yaml"
    config.write_text(textwrap.dedent(f"""\
        backends:
          diffusiongemma: {{kind: openai, model: {PUBLISHED}, base_url: {strict_sim.base_url}}}
        routing:
          tiers: [{{name: only, backends: [diffusiongemma]}}]
        """))
    result = subprocess.run([sys.executable, "-m", "router.cli", "doctor", "-c", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    assert SHOUTED in result.stdout and "did you mean" in result.stdout


def _llama_server(files: list[str], owner: str = "llamacpp"):
    """llama.cpp's llama-server as its wire shows it: /v1/models lists the .gguf paths it loaded;
    with one, a chat request for any name is answered by it (in router mode, by id, file or stem)."""
    import httpx

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": f, "object": "model", "owned_by": owner} for f in files]})
        asked = json.loads(request.content)["model"]
        known = {n for f in files for n in (f, f.rsplit("/", 1)[-1], f.rsplit("/", 1)[-1].removesuffix(".gguf"))}
        if len(files) > 1 and asked not in known:
            return httpx.Response(404, json={"error": {"message": f"model {asked} not found"}})
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                                      "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    return handler


def _asks(base_url: str, model: str) -> bool:
    from router import Router

    config = {"backends": {"b": {"kind": "openai", "model": model, "base_url": base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["b"]}]}}
    with Router.from_config(config) as router:
        try:
            return router.complete("hello", model="b").text == "hi"
        except Exception:  # any failure to answer is what this tells
            return False


def test_a_llama_cpp_server_listing_its_gguf_path_passes_as_asking_it_works(answering):
    url = answering(_llama_server(["/models/qwen3-8b-q4_k_m.gguf"]))
    check = check_backend("llama-cpp", _spec(url, "local-gguf"), timeout_s=5)
    assert check.ok and "qwen3-8b-q4_k_m.gguf" in check.detail, check.detail
    assert _asks(url, "local-gguf")  # what the doctor says is what asking does


def test_llama_cpp_with_several_models_needs_one_of_their_names(answering):
    url = answering(_llama_server(["/m/qwen3-8b.gguf", "/m/gemma-3-4b.gguf"]))
    assert check_backend("q", _spec(url, "qwen3-8b"), timeout_s=5).ok and _asks(url, "qwen3-8b")
    wrong = check_backend("q", _spec(url, "local-gguf"), timeout_s=5)
    assert not wrong.ok and "does not serve 'local-gguf'" in wrong.detail and not _asks(url, "local-gguf")


def test_vllm_serving_a_gguf_by_its_path_still_needs_that_exact_name(answering):
    url = answering(_llama_server(["/models/qwen3-8b.gguf"], owner="vllm"))
    check = check_backend("q", _spec(url, "qwen3-8b"), timeout_s=5)
    assert not check.ok and "/models/qwen3-8b.gguf" in check.detail
