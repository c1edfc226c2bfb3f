"""The in-process DiffusionGemma engine: a tiny random-weight checkpoint built at test time runs
through transformers' real generation loop, behind the backend interface, the Router, the CLI and
the OpenAI-compatible engine server (real httpx on loopback).

Tests marked `torch` need the `local` extra and skip cleanly without it; the missing-dependency
path and Mercury's diffusing stream mode run everywhere.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from backends.base import BackendSettings
from backends.errors import BackendTimeout, UsageError
from backends.types import DraftChunk, FinalChunk, Request, TextChunk

pytestmark = [pytest.mark.unit, pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")]

ROOT = Path(__file__).resolve().parent.parent
CANVAS = 16  # backends.diffusion.tiny.TINY_CANVAS_LENGTH, without importing torch here
PROMPT = [{"role": "user", "content": "why is the sky blue"}]

# Makes `import torch` / `import transformers` fail in a child process, as on a machine without the extra.
_BLOCKER = textwrap.dedent("""\
    import sys
    class _Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "transformers"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, _Block())
    """)


def _child(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-c", _BLOCKER + textwrap.dedent(code), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=60)


# ------------------------------------------------------------------ without the extra (always run)


@pytest.mark.integration
def test_missing_torch_is_explained_by_the_backend(tmp_path):
    result = _child("""
        import asyncio
        from backends import BackendSettings, Request, build_backend
        from backends.errors import BackendError
        backend = build_backend("diffusion-local", BackendSettings(name="local", model=sys.argv[1]))
        try:
            asyncio.run(backend.complete(Request(messages=[{"role": "user", "content": "hi"}])))
        except BackendError as exc:
            print(type(exc).__name__, exc.retryable, exc)
        """, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("EngineSetupError False local: ")
    for needed in ("torch", "pip install torch==2.13.0", "latency-router[local]", "vLLM", "mlx-vlm", "NIM"):
        assert needed in result.stdout


@pytest.mark.integration
def test_missing_torch_is_a_clean_cli_error(tmp_path):
    # `engine serve` runs the model, so it needs torch (`engine info` does not: the test below).
    result = _child("""
        sys.argv = ["route", "engine", "serve", "--model", sys.argv[1], "--port", "0"]
        from router.cli.app import run
        run()
        """, str(tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "pip install torch==2.13.0" in result.stderr and "EngineSetupError" in result.stderr


def _safetensors(path: Path, shapes: dict[str, list[int]]) -> int:
    """A safetensors file of zeros with these float32 tensors, written by hand (no torch); returns
    how many values it holds."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes.items():
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return offset // 4


@pytest.mark.integration
def test_engine_info_needs_neither_torch_nor_transformers(tmp_path):
    """A vLLM user without the `local` extra gets the facts and the serve command; config.json
    leaves out what equals transformers' defaults (as `save_pretrained` writes it), and the layer
    scalars stored beside the weights are buffers, not parameters."""
    text = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1, "vocab_size": 1000,
            "num_experts": 8, "top_k_experts": 2, "model_type": "diffusion_gemma_text"}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "diffusion_gemma", "canvas_length": 32,
                                                      "text_config": text}))
    values = _safetensors(tmp_path / "model-00001-of-00002.safetensors",
                          {"model.embed_tokens.weight": [1000, 64], "model.layers.0.mlp.up_proj.weight": [128, 64]})
    values += _safetensors(tmp_path / "model-00002-of-00002.safetensors",
                           {"model.layers.5.self_attn.q_proj.weight": [128, 64], "model.layers.5.layer_scalar": [1]})
    result = _child("""
        sys.argv = ["route", "engine", "info", sys.argv[1], "--json"]
        from router.cli.app import run
        try:
            run()
        finally:
            print("imported:", sorted(m for m in ("torch", "transformers") if m in sys.modules), file=sys.stderr)
        """, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "imported: []" in result.stderr
    info = json.loads(result.stdout)
    assert info["parameters"] == values - 1 and info["weights_bytes"]["bfloat16"] == 2 * (values - 1)
    assert (info["canvas_length"], info["layers"], info["experts"], info["vocab_size"]) == (32, 6, 8, 1000)
    # Five sliding layers (2 KV heads x 16) and the last, full one (1 KV head x 32): keys and values, bf16.
    assert info["kv_cache_bytes_per_1k_tokens"] == 1000 * 2 * 2 * (5 * 2 * 16 + 1 * 32)
    assert info["max_position_embeddings"] == 131_072  # transformers' default, not in the file
    assert info["serve_with_vllm"][0].startswith(f"vllm serve {tmp_path} --served-model-name google/diffusiongemma")
    human = _child("""
        sys.argv = ["route", "engine", "info", sys.argv[1]]
        from router.cli.app import run
        run()
        """, str(tmp_path))
    assert human.returncode == 0, human.stderr
    assert f"{values - 1:,}" in human.stdout and "vllm serve" in human.stderr


@pytest.mark.integration
def test_engine_info_refuses_what_is_not_a_diffusiongemma_checkpoint(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    for target, message in ((tmp_path, "is a 'llama' checkpoint"), (tmp_path / "nope", "does not exist")):
        result = _child("""
            sys.argv = ["route", "engine", "info", sys.argv[1]]
            from router.cli.app import run
            run()
            """, str(target))
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_route_help_does_not_import_torch():
    result = subprocess.run([sys.executable, "-c", "import sys; sys.argv=['route', '--help']\n"
                             "from router.cli.app import app\n"
                             "try: app()\nexcept SystemExit: pass\n"
                             "print('torch' in sys.modules, 'transformers' in sys.modules)"],
                            capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert result.stdout.strip().endswith("False False"), result.stdout + result.stderr


@pytest.mark.integration
async def test_mercury_diffusing_stream_becomes_drafts_then_one_committed_text(answering):
    from backends.openai_http import OpenAIBackend

    drafts = ["tha sky iz blu", "the sky is blu", "The sky is blue."]
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        events = [{"choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]} for d in drafts]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 4}})
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    settings = BackendSettings(name="mercury-2", model="mercury-2", base_url=answering(handler),
                               decoding="diffusion", params={"diffusing": True})
    backend = OpenAIBackend(settings)
    chunks = [c async for c in backend.stream(Request(messages=PROMPT))]
    await backend.aclose()
    assert seen[0]["diffusing"] is True and seen[0]["stream"] is True
    assert [c.text for c in chunks if isinstance(c, DraftChunk)] == drafts
    assert [c.step for c in chunks if isinstance(c, DraftChunk)] == [1, 2, 3]
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["The sky is blue."]
    assert isinstance(chunks[-1], FinalChunk) and chunks[-1].completion.text == "The sky is blue."


# ------------------------------------------------------------------------------ with the extra

torch_only = pytest.mark.torch


@pytest.fixture(autouse=True)
def _needs_the_extra(request):
    if request.node.get_closest_marker("torch"):
        pytest.importorskip("torch")
        pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from backends.diffusion.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-diffusiongemma"))


def _settings(path: Path, **changes) -> BackendSettings:
    values = dict(name="local", model=str(path), decoding="diffusion", canvas_length=CANVAS,
                  options={"device": "cpu"}, timeout_s=60.0)
    values.update(changes)
    return BackendSettings(**values)


@pytest.fixture(scope="module")
def backend(tiny_path):
    from backends.diffusion.local import DiffusionLocalBackend

    b = DiffusionLocalBackend(_settings(tiny_path))
    b.load()
    yield b
    asyncio.run(b.aclose())


async def _collect(backend, **request):
    request.setdefault("messages", PROMPT)
    return [c async for c in backend.stream(Request(**request))]


def _final(chunks):
    assert isinstance(chunks[-1], FinalChunk)
    return chunks[-1].completion


def _split(chunks) -> tuple[list[DraftChunk], str]:
    """The drafts, and the committed text joined."""
    drafts = [c for c in chunks if isinstance(c, DraftChunk)]
    return drafts, "".join(c.text for c in chunks if isinstance(c, TextChunk))


def _sse_events(response) -> list[dict]:
    lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    return [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]


def _sse_text_and_finish(events: list[dict]) -> tuple[str, str | None]:
    choices = [choice for event in events for choice in event["choices"]]
    finishes = [choice["finish_reason"] for choice in choices if choice["finish_reason"]]
    return "".join(choice["delta"].get("content") or "" for choice in choices), (finishes or [None])[-1]


@torch_only
async def test_generation_end_to_end_streams_drafts_then_committed_canvases(backend):
    chunks = await _collect(backend, max_tokens=3 * CANVAS, extra={"seed": 1})
    completion = _final(chunks)
    drafts, text = _split(chunks)
    assert text == completion.text
    assert completion.text.strip()
    stats = completion.diffusion
    assert (stats.canvas_length, stats.canvases) == (CANVAS, 3)  # the tiny model never emits EOS
    assert completion.finish_reason == "length"
    assert stats.denoising_steps == len(drafts)  # put_draft is called once per decoder forward pass
    assert {d.canvas for d in drafts} == set(range(stats.canvases))
    assert completion.metadata["tokens_per_forward"] == pytest.approx(
        completion.usage.output_tokens / stats.denoising_steps, rel=0.2)


@torch_only
async def test_drafts_come_first_and_the_completion_says_where_it_ran(backend):
    chunks = await _collect(backend, max_tokens=CANVAS, extra={"seed": 1})
    completion = _final(chunks)
    # The first draft precedes the first committed text: that is what the live view shows.
    assert isinstance(chunks[0], DraftChunk)
    assert completion.usage.input_tokens > 5
    assert completion.timings.ttft_s > completion.metadata["first_draft_s"]
    assert (completion.metadata["device"], completion.metadata["dtype"]) == ("cpu", "float32")


@torch_only
async def test_same_seed_same_answer(backend):
    a = _final(await _collect(backend, max_tokens=CANVAS, extra={"seed": 7}))
    b = _final(await _collect(backend, max_tokens=CANVAS, extra={"seed": 7}))
    assert a.text == b.text


@torch_only
async def test_denoising_step_limit_reaches_generation(backend):
    # A confidence threshold nothing reaches disables adaptive stopping: every canvas takes the limit.
    extra = {"seed": 2, "max_denoising_steps": 3, "confidence_threshold": 1e-12}
    completion = _final(await _collect(backend, max_tokens=CANVAS, extra=extra))
    assert completion.diffusion.canvases == 1 and completion.diffusion.denoising_steps == 3
    assert completion.metadata["generation"]["max_denoising_steps"] == 3


@torch_only
async def test_stopping_thresholds_reach_generation(backend):
    # Stable for 0 steps and any confidence: adaptive stopping ends every canvas after one step.
    extra = {"seed": 2, "max_new_tokens": 2 * CANVAS, "stability_threshold": 0, "confidence_threshold": 1e9}
    completion = _final(await _collect(backend, extra=extra))
    assert completion.diffusion.canvases == 2 and completion.diffusion.denoising_steps == 2
    assert completion.metadata["generation"]["stability_threshold"] == 0


@torch_only
async def test_entropy_bound_reaches_the_sampler(backend):
    async def drafts(bound: float) -> list[str]:
        extra = {"seed": 5, "entropy_bound": bound, "confidence_threshold": 1e-12}
        return [c.text for c in await _collect(backend, max_tokens=CANVAS, extra=extra) if isinstance(c, DraftChunk)]

    tight, tight_again, loose = await drafts(0.1), await drafts(0.1), await drafts(1e4)
    assert tight == tight_again  # same seed, same bound: same denoising path
    assert tight != loose  # accepting every token changes what the next step starts from


@torch_only
async def test_max_tokens_and_temperature_map_to_canvases_and_schedule(backend):
    completion = _final(await _collect(backend, max_tokens=CANVAS + 1, temperature=0.6, extra={"seed": 3}))
    gen = completion.metadata["generation"]
    assert gen["max_new_tokens"] == CANVAS + 1 and gen["t_max"] == 0.6 and gen["t_min"] == 0.3
    assert completion.diffusion.canvases == 2  # whole canvases: ceil(17 / 16)


@torch_only
async def test_bad_overrides_are_usage_errors(backend):
    with pytest.raises(UsageError, match="t_max"):
        await _collect(backend, extra={"t_min": 0.9})  # above the default t_max 0.8: transformers refuses
    with pytest.raises(UsageError, match="entropy_bound"):
        await _collect(backend, extra={"entropy_bound": -1})
    with pytest.raises(UsageError, match="max_denoising_stepz"):
        await _collect(backend, extra={"max_denoising_stepz": 4})


@torch_only
async def test_stop_string_truncates_and_stops(backend):
    full = _final(await _collect(backend, max_tokens=3 * CANVAS, extra={"seed": 11}))
    word = full.text.split()[3]
    cut = full.text.index(word)
    chunks = await _collect(backend, max_tokens=3 * CANVAS, stop=[word], extra={"seed": 11})
    completion = _final(chunks)
    assert completion.text == full.text[:cut] and completion.finish_reason == "stop"


@torch_only
async def test_cancelling_the_stream_stops_generation(backend):
    engine = await backend.engine()
    before = dict(engine.stats)
    huge = 400 * CANVAS  # 400 canvases x 8 steps: many seconds if it ran to the end
    stream = backend.stream(Request(messages=PROMPT, max_tokens=huge, extra={"confidence_threshold": 1e-12}))
    async for chunk in stream:
        if isinstance(chunk, DraftChunk):
            break
    await stream.aclose()  # what a client hanging up or `break` + GC does
    for _ in range(500):
        if engine.stats["cancelled"] > before["cancelled"]:
            break
        await asyncio.sleep(0.01)
    assert engine.stats["cancelled"] == before["cancelled"] + 1
    assert engine.stats["denoising_steps"] - before["denoising_steps"] < 50  # of the 3,200 it would have run


@torch_only
async def test_cancelling_the_consuming_task_stops_generation(backend):
    engine = await backend.engine()
    before = dict(engine.stats)
    first_draft = asyncio.Event()

    async def consume():
        request = Request(messages=PROMPT, max_tokens=400 * CANVAS, extra={"confidence_threshold": 1e-12})
        async for chunk in backend.stream(request):
            if isinstance(chunk, DraftChunk):
                first_draft.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_draft.wait(), 30)
    task.cancel()  # e.g. the router's deadline, or Ctrl-C in the CLI
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(500):
        if engine.stats["cancelled"] > before["cancelled"]:
            break
        await asyncio.sleep(0.01)
    assert engine.stats["cancelled"] == before["cancelled"] + 1
    assert engine.stats["denoising_steps"] - before["denoising_steps"] < 50


@torch_only
def test_engine_job_cancelled_from_a_draft_stops_after_that_step(backend):
    from backends.diffusion.engine import EngineJob

    engine = backend.load()
    events: list = []
    done = threading.Event()

    def emit(event):
        events.append(event)
        if event[0] == "draft":
            job.cancel()
        if event[0] in ("done", "cancelled", "error"):
            done.set()

    config = engine.generation_config({"max_new_tokens": 100 * CANVAS})
    job = EngineJob(input_ids=engine.encode(PROMPT), generation_config=config, emit=emit)
    engine.submit(job)
    assert done.wait(30)
    kind, result = events[-1]
    assert kind == "cancelled" and result.denoising_steps == 1 and result.canvases == 0
    assert [e[0] for e in events].count("draft") == 1


@torch_only
async def test_deadline_stops_generation_with_a_timeout(backend):
    engine = await backend.engine()
    before = engine.stats["cancelled"]
    with pytest.raises(BackendTimeout, match="denoising steps"):
        await _collect(backend, max_tokens=2000 * CANVAS, timeout_s=0.3, extra={"confidence_threshold": 1e-12})
    assert engine.stats["cancelled"] == before + 1


@torch_only
def test_missing_weights_and_wrong_checkpoint_are_explained(tmp_path):
    from backends.diffusion.load import EngineSetupError, read_config

    with pytest.raises(EngineSetupError, match="no DiffusionGemma weights at .*hf download.*vLLM"):
        read_config(str(tmp_path / "nowhere"))
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(EngineSetupError, match="'gpt2' checkpoint, not DiffusionGemma.*mlx-vlm"):
        read_config(str(tmp_path / "gpt2"))
    with pytest.raises(EngineSetupError, match="not in the local Hugging Face cache"):
        read_config("nobody/no-such-model-here")


@torch_only
def test_device_choice(caplog):
    import torch

    from backends.diffusion.load import EngineSetupError, choose_device

    assert choose_device(torch, {"device": "cpu"}) == ("cpu", torch.float32)
    assert choose_device(torch, {"device": "cpu", "dtype": "bfloat16"}) == ("cpu", torch.bfloat16)
    with pytest.raises(EngineSetupError, match="dtype"):
        choose_device(torch, {"dtype": "float8"})
    if not torch.cuda.is_available():
        with caplog.at_level("WARNING"):
            assert choose_device(torch, {})[0] in ("cpu", "mps")
        assert "slow" in caplog.text or "minutes" in caplog.text


# --------------------------------------------------------------------- router, CLI, HTTP server


def _config_dict(path: Path) -> dict:
    return {
        "backends": {"local": {"kind": "diffusion-local", "model": str(path), "decoding": "diffusion",
                               "canvas_length": CANVAS, "options": {"device": "cpu"}, "params": {"seed": 4}}},
        "routing": {"tiers": [{"name": "local", "backends": ["local"]}]},
    }


@torch_only
def test_router_routes_to_the_local_engine(tiny_path):
    from router.core import Router

    with Router.from_config(_config_dict(tiny_path)) as router:
        result = router.complete("why is the sky blue", max_tokens=CANVAS)
        chunks = list(router.stream("why is the sky blue", max_tokens=CANVAS))
    assert result.decision.chosen == "local" and result.completion.backend == "local"
    assert result.completion.diffusion.denoising_steps >= 1 and result.text.strip()
    assert any(isinstance(c, DraftChunk) for c in chunks)
    assert _final(chunks).text == result.text  # params carry the seed: the same answer both ways


@pytest.fixture
def cli_config(tiny_path, tmp_path) -> Path:
    import yaml

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_config_dict(tiny_path)))
    return path


def _cli(*args: str):
    from typer.testing import CliRunner

    from router.cli.app import app

    return CliRunner().invoke(app, list(args))


@torch_only
def test_cli_answers_through_the_local_engine(cli_config):
    result = _cli("-c", str(cli_config), "--max-tokens", str(CANVAS), "why is the sky blue")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip()
    assert "→ local" in result.stderr and "tok/forward" in result.stderr


@torch_only
def test_cli_watch_shows_final_text_and_tokens_per_forward(cli_config):
    plain = _cli("-c", str(cli_config), "--no-stream", "--max-tokens", str(CANVAS), "why is the sky blue")
    watched = _cli("-c", str(cli_config), "--watch", "--max-tokens", str(CANVAS), "why is the sky blue")
    assert watched.exit_code == 0, watched.stderr
    assert watched.stdout == plain.stdout  # drafts never reach stdout
    assert "tokens per forward pass" in watched.stderr and "drafts shown" in watched.stderr


@torch_only
async def test_canvas_view_draws_drafts_then_committed_text(backend):
    from rich.console import Console

    from router.cli.watch import CanvasView

    view, frames = CanvasView("local"), []
    for chunk in await _collect(backend, max_tokens=2 * CANVAS, extra={"seed": 1}):
        view.update(chunk)
        console = Console(record=True, width=200, color_system="truecolor", force_terminal=True, file=io.StringIO())
        console.print(view.render())
        frames.append((chunk, console.export_text(styles=True, clear=False), console.export_text()))
    draft_frames = [(c, styled) for c, styled, _ in frames if isinstance(c, DraftChunk) and c.text]
    chunk, styled = draft_frames[0]
    assert "canvas 1 · denoising step 1" in styled and "\x1b[33m" in styled  # the draft is yellow
    assert frames[-1][2].splitlines()[1:] and "done" in frames[-1][2]
    assert view.completion.text.split()[0] in frames[-1][2]


@torch_only
def test_cli_engine_info_reports_config_and_memory(tiny_path):
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    result = _cli("engine", "info", str(tiny_path), "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(tiny_path, local_files_only=True)
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    assert info["canvas_length"] == CANVAS and info["weights_bytes"]["float32"] == 4 * info["parameters"]
    assert info["weights_on_disk_bytes"] > 0 and torch is not None
    command = info["serve_with_vllm"][0]
    assert command.startswith(f"vllm serve {tiny_path} --served-model-name google/diffusiongemma-26B-A4B-it")


@torch_only
def test_engine_info_reads_the_kv_cache_shape_as_transformers_does(tiny_path):
    """Read from JSON alone, per-layer KV shapes match transformers' own config objects: the tiny
    checkpoint's file (per_layer_config written out) and the published shapes without it."""
    from transformers import AutoConfig

    from backends.diffusion.info import _text, kv_bytes_per_token
    from backends.diffusion.shapes import published_config

    def expected(config) -> int:
        text = config.text_config
        return sum(2 * text.per_layer_config[i].num_key_value_heads * text.per_layer_config[i].head_dim * 2
                   for i in range(len(text.layer_types)))

    tiny = json.loads((tiny_path / "config.json").read_text())
    assert kv_bytes_per_token(_text(tiny)) == expected(AutoConfig.from_pretrained(tiny_path))
    published = published_config()
    bare = published.to_dict()
    bare["text_config"].pop("per_layer_config")
    bare["text_config"].update(global_head_dim=512, num_global_key_value_heads=2)  # as the checkpoint states them
    assert kv_bytes_per_token(_text(bare)) == kv_bytes_per_token(_text(published.to_dict())) == expected(published)


@torch_only
def test_cli_engine_info_gives_the_vllm_recipe_with_reasons(tiny_path):
    result = _cli("engine", "info", str(tiny_path))
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stderr.split())
    for flag in ("--max-num-seqs 4", "--generation-config vllm", "--gpu-memory-utilization 0.8"):
        assert flag in text
    assert "262k" in text and "max_tokens: 256" in text


@torch_only
def test_cli_engine_serve_refuses_missing_weights(tmp_path):
    result = _cli("engine", "serve", "--model", str(tmp_path / "missing"), "--port", "0")
    assert result.exit_code == 2
    assert "no DiffusionGemma weights" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def engine_server(backend):
    from router.engine_server import EngineServer

    with EngineServer(backend, port=0, served_name="tiny-dg") as server:
        yield server


@pytest.mark.integration
@torch_only
def test_engine_server_health_and_models(engine_server):
    root = engine_server.base_url.removesuffix("/v1")
    health = httpx.get(f"{root}/healthz").json()
    assert health["status"] == "ok" and set(health["engine"]) == {"done", "cancelled", "failed", "denoising_steps", "batches",
                                                                 "largest_batch"}
    assert [m["id"] for m in httpx.get(f"{engine_server.base_url}/models").json()["data"]] == ["tiny-dg"]


@pytest.mark.integration
@torch_only
def test_engine_server_plain_and_streamed_completions_agree(engine_server):
    url = f"{engine_server.base_url}/chat/completions"
    body = {"model": "tiny-dg", "messages": PROMPT, "max_tokens": 2 * CANVAS, "seed": 9}
    plain = httpx.post(url, json=body, timeout=60).json()
    text = plain["choices"][0]["message"]["content"]
    assert text.strip()
    assert plain["usage"]["completion_tokens"] > 0
    assert plain["diffusion"]["denoising_steps"] > 0

    with httpx.stream("POST", url, json={**body, "stream": True, "stream_options": {"include_usage": True}},
                      timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse_events(response)
    streamed, finish = _sse_text_and_finish(events)
    assert streamed == text  # committed text only: no draft ever reaches an OpenAI client
    assert finish == "length"  # the tiny model never emits EOS
    assert events[-1]["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


@pytest.mark.integration
@torch_only
def test_engine_server_client_hanging_up_stops_generation(engine_server, backend):
    engine = backend.load()
    before = dict(engine.stats)
    body = {"messages": PROMPT, "max_tokens": 400 * CANVAS, "confidence_threshold": 1e-12, "stream": True}
    with httpx.stream("POST", f"{engine_server.base_url}/chat/completions", json=body, timeout=30) as response:
        assert next(response.iter_lines()).startswith("data: ")  # the role event: generation has started
    for _ in range(500):  # the connection is closed; the server's stream is cancelled, then the job
        if engine.stats["cancelled"] > before["cancelled"]:
            break
        time.sleep(0.01)
    assert engine.stats["cancelled"] == before["cancelled"] + 1
    assert engine.stats["denoising_steps"] - before["denoising_steps"] < 400  # of the 3,200 it would have run


@pytest.mark.integration
@torch_only
def test_engine_server_rejects_bad_settings(engine_server):
    url = f"{engine_server.base_url}/chat/completions"
    response = httpx.post(url, json={"messages": PROMPT, "max_denoising_steps": "many"}, timeout=30)
    assert response.status_code == 400 and "max_denoising_steps" in response.json()["error"]["message"]
    assert httpx.post(url, json={"messages": []}, timeout=30).status_code == 400


@pytest.mark.integration
@torch_only
async def test_another_router_uses_the_engine_server_as_an_openai_backend(engine_server):
    from backends.openai_http import OpenAIBackend

    remote = OpenAIBackend(BackendSettings(name="remote", model="tiny-dg", base_url=engine_server.base_url,
                                           decoding="diffusion", canvas_length=CANVAS,
                                           params={"seed": 9, "max_denoising_steps": 4}))
    try:
        completion = await remote.complete(Request(messages=PROMPT, max_tokens=CANVAS))
        streamed = [c async for c in remote.stream(Request(messages=PROMPT, max_tokens=CANVAS))]
    finally:
        await remote.aclose()
    assert completion.text.strip() and completion.usage.output_tokens > 0
    assert _final(streamed).text == completion.text
    assert not any(isinstance(c, DraftChunk) for c in streamed)


@pytest.mark.integration
@torch_only
async def test_the_engine_server_streams_drafts_to_a_client_that_asks_for_diffusing(engine_server):
    from backends.openai_http import OpenAIBackend

    remote = OpenAIBackend(BackendSettings(name="remote", model="tiny-dg", base_url=engine_server.base_url,
                                           decoding="diffusion", canvas_length=CANVAS,
                                           params={"seed": 9, "max_denoising_steps": 4}))
    try:
        plain = await remote.complete(Request(messages=PROMPT, max_tokens=CANVAS))
        watched = [c async for c in remote.stream(Request(messages=PROMPT, max_tokens=CANVAS,
                                                          extra={"diffusing": True}))]
    finally:
        await remote.aclose()
    drafts = [c for c in watched if isinstance(c, DraftChunk)]
    assert len(drafts) >= 2  # the canvas as it denoises, then the answer
    assert drafts[-1].text == plain.text == _final(watched).text


@torch_only
def test_doctor_checks_the_checkpoint_without_loading_it(tiny_path, tmp_path):
    from router.config import BackendConfig
    from router.doctor import check_backend

    good = check_backend("local", BackendConfig(kind="diffusion-local", model=str(tiny_path)), timeout_s=1)
    bad = check_backend("local", BackendConfig(kind="diffusion-local", model=str(tmp_path / "none")), timeout_s=1)
    assert good.ok and f"canvas {CANVAS}" in good.detail
    assert not bad.ok and "no DiffusionGemma weights" in bad.detail


@pytest.mark.integration
@torch_only
def test_route_engine_serve_answers_over_http(tiny_path):
    import re
    import signal

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "COLUMNS": "300"}
    process = subprocess.Popen([sys.executable, "-m", "router.cli", "engine", "serve", "--model", str(tiny_path),
                                "--port", "0", "--served-name", "tiny", "--device", "cpu"],
                               cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        base_url = None
        for line in process.stderr:  # progress bars and notes; the URL line says where it listens
            if match := re.search(r"(http://127\.0\.0\.1:\d+/v1)", line):
                base_url = match.group(1)
                break
        assert base_url, "route engine serve never said where it listens"
        for _ in range(200):
            try:
                if httpx.get(base_url.removesuffix("/v1") + "/healthz").status_code == 200:
                    break
            except httpx.ConnectError:
                pass
            time.sleep(0.05)
        body = {"model": "tiny", "messages": PROMPT, "max_tokens": CANVAS}
        answer = httpx.post(f"{base_url}/chat/completions", json=body, timeout=60).json()
        assert answer["model"] == "tiny" and answer["choices"][0]["message"]["content"].strip()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
