"""The tiny DiffusionGemma mirrors the published config's structure; transformers' quirks are worked
around (and the workaround is dropped when upstream is fixed); concurrent requests are batched and
say where they queued. Needs the `local` extra (torch, transformers); skipped cleanly without it.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from backends.base import BackendSettings
from backends.types import Request

pytestmark = [pytest.mark.unit, pytest.mark.torch,
              pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")]

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

CANVAS = 16
PROMPT = [{"role": "user", "content": "why is the sky blue"}]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> Path:
    from backends.diffusion.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-published-shape"))


@pytest.fixture(scope="module")
def backend(tiny_path):
    from backends.diffusion.local import DiffusionLocalBackend

    settings = BackendSettings(name="local", model=str(tiny_path), decoding="diffusion", canvas_length=CANVAS,
                               options={"device": "cpu", "max_batch": 4}, timeout_s=60.0)
    b = DiffusionLocalBackend(settings)
    b.load()
    yield b
    asyncio.run(b.aclose())


# ------------------------------------------------------------------ the model's structure


def test_tiny_config_has_the_published_structure(tiny_path):
    from transformers import AutoConfig

    from backends.diffusion.shapes import published_config

    config = AutoConfig.from_pretrained(tiny_path, local_files_only=True)
    text, published = config.text_config, published_config().text_config
    assert text.layer_types[:6] == published.layer_types[:6]
    for key in ("use_bidirectional_attention", "tie_word_embeddings", "final_logit_softcapping"):
        assert getattr(text, key) == getattr(published, key), key
    assert text.layer_types == ["sliding_attention"] * 5 + ["full_attention"]  # the published 5:1 pattern
    assert text.per_layer_config[5].head_dim > text.per_layer_config[0].head_dim  # wider global heads
    assert text.use_bidirectional_attention == "vision"
    assert text.num_experts > text.top_k_experts > 1
    assert config.vision_config.model_type == "gemma4_vision"
    assert config.tie_word_embeddings and text.tie_word_embeddings


def test_tiny_model_generates_with_tied_embeddings(backend):
    model = backend.load().loaded.model
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    completion = asyncio.run(backend.complete(Request(messages=PROMPT, max_tokens=CANVAS)))
    assert completion.diffusion.canvases == 1 and completion.usage.output_tokens == CANVAS


def _all_bidirectional(tmp_path: Path) -> tuple:
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from backends.diffusion.tiny import build_tiny_checkpoint

    path = build_tiny_checkpoint(tmp_path / "all", bidirectional="all", layers=2)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(path, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    ids = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    return model, ids


def test_transformers_still_crashes_on_all_bidirectional_attention(tmp_path):
    """When this fails, transformers fixed the is_causal clash: delete backends/diffusion/compat.py's
    workaround (and this test)."""
    model, ids = _all_bidirectional(tmp_path)
    with pytest.raises(TypeError, match="multiple values for keyword argument 'is_causal'"):
        model.generate(ids, max_new_tokens=CANVAS, max_denoising_steps=2)


def test_the_workaround_makes_all_bidirectional_attention_generate(tmp_path):
    from backends.diffusion.compat import patch_model

    model, ids = _all_bidirectional(tmp_path)
    assert patch_model(model) == 2  # one encoder attention per layer
    out = model.generate(ids, max_new_tokens=CANVAS, max_denoising_steps=2)
    assert out.sequences.shape[1] == ids.shape[1] + CANVAS


# ------------------------------------------------------------------ batching and the queue


def _jobs(engine, n: int, *, seed: int | None = None, max_new_tokens: int = 2 * CANVAS):
    from backends.diffusion.engine import EngineJob

    config = engine.generation_config({"max_new_tokens": max_new_tokens})
    done = [threading.Event() for _ in range(n)]
    events: list[list] = [[] for _ in range(n)]

    def emitter(i):
        def emit(event):
            events[i].append(event)
            if event[0] in ("done", "cancelled", "error"):
                done[i].set()
        return emit

    prompts = [PROMPT, [{"role": "user", "content": "hello world"}]]  # two lengths: left padding is exercised
    jobs = [EngineJob(input_ids=engine.encode(prompts[i % 2]), generation_config=config, emit=emitter(i), seed=seed)
            for i in range(n)]
    return jobs, events, done


def test_jobs_queued_together_run_as_one_batch(backend):
    engine = backend.load()
    before = dict(engine.stats)
    jobs, events, done = _jobs(engine, 4)
    engine.submit_all(jobs)
    assert all(d.wait(60) for d in done)
    assert engine.stats["batches"] == before["batches"] + 1 and engine.stats["largest_batch"] == 4
    for i, log in enumerate(events):
        kinds = [kind for kind, _ in log]
        assert kinds[0] == "queued" and log[0][1].ahead == i and kinds[-1] == "done"
        result = log[-1][1]
        assert result.batch_size == 4 and result.canvases == 2 and result.output_tokens == 2 * CANVAS
        assert result.text and result.text == "".join(p for kind, p in log if kind == "text")


def test_seeded_jobs_run_alone_and_repeat(backend):
    engine = backend.load()
    before = engine.stats["batches"]
    jobs, events, done = _jobs(engine, 2, seed=7)
    jobs[1].input_ids = jobs[0].input_ids
    engine.submit_all(jobs)
    assert all(d.wait(60) for d in done)
    assert engine.stats["batches"] == before + 2
    assert events[0][-1][1].text == events[1][-1][1].text and events[0][-1][1].batch_size == 1


def test_a_cancelled_row_leaves_the_rest_of_the_batch_running(backend):
    engine = backend.load()
    jobs, events, done = _jobs(engine, 3, max_new_tokens=4 * CANVAS)
    original = jobs[1].emit

    def cancel_on_first_draft(event):
        original(event)
        if event[0] == "draft":
            jobs[1].cancel()

    jobs[1].emit = cancel_on_first_draft
    engine.submit_all(jobs)
    assert all(d.wait(60) for d in done)
    assert [log[-1][0] for log in events] == ["done", "cancelled", "done"]
    assert events[1][-1][1].denoising_steps == 1 and events[0][-1][1].canvases == 4


async def test_concurrent_requests_report_queue_and_batch(backend):
    engine = await backend.engine()
    before = engine.stats["done"]
    request = Request(messages=PROMPT, max_tokens=CANVAS)
    completions = await asyncio.gather(*(backend.complete(request) for _ in range(4)))
    assert engine.stats["done"] == before + 4
    for completion in completions:
        queue = completion.metadata["queue"]
        assert {"ahead", "running", "max_batch", "wait_s"} <= set(queue) and queue["max_batch"] == 4
        assert 1 <= completion.metadata["batch_size"] <= 4
    # Submitted in order, each saw everyone before it, waiting or being generated: none waited silently.
    assert [c.metadata["queue"]["ahead"] + c.metadata["queue"]["running"] for c in completions] == [0, 1, 2, 3]
    assert backend.queue_state() == {"waiting": 0, "running": 0, "max_batch": 4}


def test_bad_max_batch_is_refused_before_loading(tiny_path):
    from backends.diffusion.load import EngineSetupError
    from backends.diffusion.local import DiffusionLocalBackend

    settings = BackendSettings(name="local", model=str(tiny_path), options={"device": "cpu", "max_batch": 0})
    with pytest.raises(EngineSetupError, match="max_batch must be a positive integer"):
        DiffusionLocalBackend(settings).load()


# ------------------------------------------------------------------ thinking, in process


def test_thinking_switch_reaches_the_chat_template(backend):
    engine = backend.load()
    tokenizer = engine.loaded.tokenizer
    on = tokenizer.convert_ids_to_tokens(engine.encode(PROMPT, thinking=True)[0])
    off = tokenizer.convert_ids_to_tokens(engine.encode(PROMPT, thinking=False)[0])
    assert "<|think|>" in on and "<|think|>" not in off


def test_decoding_keeps_the_thinking_markers_and_drops_other_specials(backend):
    from backends.diffusion.streamer import visible_ids
    from backends.thinking import split_thinking

    engine = backend.load()
    tokenizer = engine.loaded.tokenizer
    tokens = ["<start_of_turn>", "<|channel>", "thought", "why", "<channel|>", "the", "sky", "<end_of_turn>"]
    ids = visible_ids(tokenizer.convert_tokens_to_ids(tokens), engine._hidden)
    text = tokenizer.decode(ids, skip_special_tokens=False)
    assert "<start_of_turn>" not in text and "<end_of_turn>" not in text
    thinking, answer = split_thinking(text)
    assert thinking.strip() == "why" and answer.split() == ["the", "sky"]


def test_unknown_thinking_value_is_a_usage_error(backend):
    from backends.errors import UsageError

    with pytest.raises(UsageError, match="thinking must be true or false"):
        asyncio.run(backend.complete(Request(messages=PROMPT, extra={"thinking": "yes"})))


# ------------------------------------------------------------------ the queue in predictions


def test_a_busy_engine_shows_its_queue_in_explain(backend):
    from backends.diffusion.engine import EngineJob
    from router.core import Router

    config = {"backends": {"local": {"kind": "diffusion-local", "model": backend.model, "decoding": "diffusion",
                                     "canvas_length": CANVAS}},
              "routing": {"tiers": [{"name": "local", "backends": ["local"]}]}}
    engine = backend.load()
    started, finished = threading.Event(), threading.Event()

    def emit(event):
        if event[0] == "started":
            started.set()
        if event[0] in ("done", "cancelled", "error"):
            finished.set()

    long = EngineJob(input_ids=engine.encode(PROMPT), emit=emit,
                     generation_config=engine.generation_config({"max_new_tokens": 400 * CANVAS,
                                                                 "confidence_threshold": 1e-12}))
    with Router.from_config(config, backends={"local": backend}) as router:
        idle = router.explain("why is the sky blue", max_tokens=CANVAS).details["candidates"][0]
        engine.submit(long)
        assert started.wait(30)
        busy = router.explain("why is the sky blue", max_tokens=CANVAS).details["candidates"][0]
        long.cancel()
        assert finished.wait(30)
    assert idle["queue"] == {"waiting": 0, "running": 0, "max_batch": 4, "wait_p50_s": 0.0}
    assert busy["queue"]["running"] == 1 and busy["queue"]["wait_p50_s"] == pytest.approx(idle["p50_s"], rel=1e-3)
    assert busy["p50_s"] == pytest.approx(2 * idle["p50_s"], rel=1e-3)


# ------------------------------------------------------------------ tool calls, in process

TOOLS = [{"type": "function", "function": {"name": "answer", "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}]


def test_tools_reach_the_chat_template_and_the_request_runs(backend):
    engine = backend.load()
    tokenizer = engine.loaded.tokenizer
    plain = tokenizer.convert_ids_to_tokens(engine.encode(PROMPT)[0])
    declared = tokenizer.convert_ids_to_tokens(engine.encode(PROMPT, tools=TOOLS)[0])
    assert "answer" in declared and len(declared) > len(plain)
    request = Request(messages=PROMPT, max_tokens=CANVAS, extra={"tools": TOOLS, "tool_choice": "auto"})
    completion = asyncio.run(backend.complete(request))
    # Random weights never write a call; the parse of real calls is tests/test_gemma_tools.py.
    assert completion.tool_calls is None and completion.finish_reason == "length"


def test_assistant_tool_calls_and_tool_replies_reach_the_template():
    from backends.diffusion.local import _chat

    call = {"id": "call_1", "type": "function", "function": {"name": "answer", "arguments": "{}"}}
    messages = [{"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "42"}]}]
    assert _chat(messages) == [{"role": "assistant", "content": "", "tool_calls": [call]},
                               {"role": "tool", "tool_call_id": "call_1", "content": "42"}]


# ------------------------------------------------------------------ images


IMAGE = [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]


def test_image_requests_skip_a_text_only_checkpoint_and_say_why_when_nothing_else_can(tiny_path, tmp_path):
    import shutil

    from backends.diffusion.local import DiffusionLocalBackend
    from backends.errors import Unsupported
    from router.core import Router
    from router.deciding import Needs

    # The published-shape checkpoint without its image processor: a vision tower alone is not enough.
    text_only = tmp_path / "text-only"
    shutil.copytree(tiny_path, text_only, ignore=shutil.ignore_patterns("processor_config.json"))
    backend = DiffusionLocalBackend(BackendSettings(name="local", model=str(text_only), canvas_length=CANVAS))
    local = {"kind": "diffusion-local", "model": backend.model, "decoding": "diffusion", "canvas_length": CANVAS}
    both = {"backends": {"local": local, "hosted": {"kind": "openai", "model": "h"}},
            "routing": {"tiers": [{"name": "all", "backends": ["local", "hosted"]}]}}
    alone = {"backends": {"local": local}, "routing": {"tiers": [{"name": "all", "backends": ["local"]}]}}
    needs = Needs.of(IMAGE, {}, None)
    with Router.from_config(both, backends={"local": backend}, log=False) as router:
        assert router.decide(IMAGE, needs=needs).candidates == ("hosted",)
    with Router.from_config(alone, backends={"local": backend}, log=False) as router:
        with pytest.raises(Unsupported) as caught:
            router.decide(IMAGE, needs=needs)
    assert caught.value.need == "vision"


def test_max_batch_read_when_a_batch_forms_so_changing_it_while_idle_takes_effect(backend):
    engine = backend.load()
    before = engine.stats["batches"]
    engine.max_batch = 1  # the worker is already waiting for work when this changes
    try:
        jobs, events, done = _jobs(engine, 3, max_new_tokens=CANVAS)
        engine.submit_all(jobs)
        assert all(d.wait(60) for d in done)
    finally:
        engine.max_batch = 4
    assert engine.stats["batches"] == before + 3
    assert [log[-1][1].batch_size for log in events] == [1, 1, 1]
