"""Images in the in-process DiffusionGemma engine: inline PNG/JPEG `image_url` parts are decoded with
Pillow, preprocessed by the checkpoint's own image processor (transformers' Pillow implementation)
and reach the model's vision tower; http URLs are refused without a fetch; only a checkpoint with a
vision tower and an image processor declares vision, so the router sends images to it and nowhere
else. The tiny checkpoint (random weights, a tiny vision tower, an image processor config) is
built at test time. Decoding and the checkpoint probe need Pillow only; the rest needs the
`local` extra and is skipped cleanly without it.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import shutil
import threading
from pathlib import Path

import httpx
import pytest

from backends.base import BackendSettings
from backends.errors import Unsupported, UsageError
from backends.types import DraftChunk, FinalChunk, Request

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402  (after the skip: Pillow comes with the `local` extra)

pytestmark = [pytest.mark.unit, pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")]

CANVAS = 16  # backends.diffusion.tiny.TINY_CANVAS_LENGTH, without importing torch here
PATCHES = 70 * 9  # the tiny processor's patch budget: 70 soft tokens, each 3 x 3 patches
PATCH_PIXELS = 16 * 16 * 3


def _data_url(size=(60, 40), fmt="PNG", color=(200, 30, 30), mime=None) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, fmt)
    mime = mime or f"image/{fmt.lower()}"
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def _ask(*urls: str, text: str = "what is this") -> list[dict]:
    parts = [{"type": "text", "text": text}, *({"type": "image_url", "image_url": {"url": u}} for u in urls)]
    return [{"role": "user", "content": parts}]


# ------------------------------------------------------------------ decoding (Pillow only)


def test_png_and_jpeg_data_urls_decode_to_rgb():
    from backends.diffusion.vision import decode_image

    png = decode_image(_data_url((60, 40), "PNG"))
    jpeg = decode_image(_data_url((30, 20), "JPEG", mime="image/jpg"))
    assert (png.mode, png.size) == ("RGB", (60, 40)) and (jpeg.mode, jpeg.size) == ("RGB", (30, 20))
    assert png.getpixel((5, 5)) == (200, 30, 30)


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "http://127.0.0.1:9/cat.png"])
def test_http_image_urls_are_refused_without_a_fetch(url, network_guard):
    from backends.diffusion.vision import decode_image

    with pytest.raises(UsageError) as caught:
        decode_image(url)
    message = str(caught.value)
    assert "does not fetch image URLs" in message and "data:image/png;base64" in message
    assert not network_guard


@pytest.mark.parametrize(("url", "words"), [
    (_data_url(fmt="GIF"), "PNG or JPEG, got image/gif"),
    (_data_url(fmt="GIF", mime="image/png"), "holds GIF"),
    ("data:image/png;base64,!!not base64!!", "does not decode"),
    ("data:image/png;base64," + base64.b64encode(b"not an image").decode(), "not a readable image/png"),
    ("file:///etc/passwd", "not a base64 data: URL"),
    ("data:image/png,rawbytes", "not a base64 data: URL"),
])
def test_other_images_are_refused_with_the_fix(url, words):
    from backends.diffusion.vision import decode_image

    with pytest.raises(UsageError) as caught:
        decode_image(url)
    assert words in str(caught.value)


def test_image_parts_become_template_parts_in_order_and_text_stays_text():
    from backends.diffusion.vision import request_images, template_content

    a, b = _data_url(color=(1, 2, 3)), _data_url(color=(4, 5, 6))
    content = [{"type": "image_url", "image_url": {"url": a}}, {"type": "text", "text": "compare"},
               {"type": "image_url", "image_url": {"url": b}}]
    assert template_content(content) == [{"type": "image"}, {"type": "text", "text": "compare"}, {"type": "image"}]
    assert template_content([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert request_images([{"role": "user", "content": content}, {"role": "user", "content": "x"}]) == [a, b]
    with pytest.raises(UsageError, match="image_url"):
        request_images([{"role": "user", "content": [{"type": "input_image", "image_url": a}]}])


def test_the_checkpoint_probe_reads_config_files_only(tmp_path):
    from backends.diffusion.vision import checkpoint_has_vision

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "diffusion_gemma", "vision_config": {"x": 1}}))
    assert not checkpoint_has_vision(str(tmp_path))  # a vision tower, but no image processor
    (tmp_path / "processor_config.json").write_text(json.dumps({"image_processor": {"patch_size": 16}}))
    assert checkpoint_has_vision(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "diffusion_gemma"}))
    assert not checkpoint_has_vision(str(tmp_path))  # a processor, but no vision tower
    assert not checkpoint_has_vision(str(tmp_path / "missing"))


# ------------------------------------------------------------------ the engine (needs the extra)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from backends.diffusion.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-vision"))


@pytest.fixture(scope="module")
def text_only_path(tiny_path, tmp_path_factory) -> Path:
    """The same checkpoint without its image processor config."""
    path = tmp_path_factory.mktemp("tiny-text-only") / "ckpt"
    shutil.copytree(tiny_path, path, ignore=shutil.ignore_patterns("processor_config.json"))
    return path


def _settings(path: Path, name: str = "local") -> BackendSettings:
    return BackendSettings(name=name, model=str(path), decoding="diffusion", canvas_length=CANVAS,
                           options={"device": "cpu", "max_batch": 4}, timeout_s=120.0)


@pytest.fixture(scope="module")
def backend(tiny_path):
    from backends.diffusion.local import DiffusionLocalBackend

    b = DiffusionLocalBackend(_settings(tiny_path))
    b.load()
    yield b
    asyncio.run(b.aclose())


class _VisionCalls:
    """Records the pixel batches the model's real vision tower runs on."""

    def __init__(self, backend):
        self.shapes: list[tuple[int, ...]] = []
        tower = backend.load().loaded.model.model.encoder.vision_tower
        self._handle = tower.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, _module, args, kwargs):
        pixels = kwargs.get("pixel_values", args[0] if args else None)
        self.shapes.append(tuple(pixels.shape))

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self._handle.remove()


def _soft_tokens(backend, url: str) -> int:
    from backends.diffusion.vision import decode_image

    processor = backend.load().loaded.image_processor
    return int(processor(images=[decode_image(url)], return_tensors="pt")["num_soft_tokens_per_image"][0])


@pytest.mark.torch
def test_the_checkpoint_with_a_processor_declares_vision_before_and_after_loading(tiny_path, backend):
    from backends.diffusion.local import DiffusionLocalBackend

    assert DiffusionLocalBackend(_settings(tiny_path)).current_capabilities().vision  # files only, not loaded
    assert backend.current_capabilities().vision
    assert type(backend.load().loaded.image_processor).__name__ == "Gemma4ImageProcessorPil"  # no torchvision


@pytest.mark.torch
def test_engine_info_says_whether_a_checkpoint_takes_images(tiny_path, text_only_path):
    from typer.testing import CliRunner

    from router.cli.app import app

    for path, images in ((tiny_path, True), (text_only_path, False)):
        result = CliRunner().invoke(app, ["engine", "info", str(path), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["images"] is images


@pytest.mark.torch
def test_an_image_request_runs_end_to_end_with_its_pixels(backend):
    url = _data_url((60, 40), "PNG")
    text_only = asyncio.run(backend.complete(Request(messages=_ask(), max_tokens=CANVAS)))
    with _VisionCalls(backend) as vision:
        completion = asyncio.run(backend.complete(Request(messages=_ask(url), max_tokens=CANVAS)))
    assert vision.shapes == [(1, PATCHES, PATCH_PIXELS)]
    assert completion.text.strip() and completion.finish_reason == "length"
    # The one image token the template wrote became <boi>, one token per soft token, <eoi>.
    assert completion.usage.input_tokens == text_only.usage.input_tokens + _soft_tokens(backend, url) + 2


@pytest.mark.torch
def test_a_streamed_jpeg_request_shows_drafts_then_the_answer(backend):
    async def collect():
        return [c async for c in backend.stream(Request(messages=_ask(_data_url(fmt="JPEG")), max_tokens=CANVAS))]

    with _VisionCalls(backend) as vision:
        chunks = asyncio.run(collect())
    assert vision.shapes == [(1, PATCHES, PATCH_PIXELS)]
    assert any(isinstance(c, DraftChunk) for c in chunks) and isinstance(chunks[-1], FinalChunk)


@pytest.mark.torch
def test_image_and_text_requests_share_a_batch(backend):
    from backends.diffusion.engine import EngineJob
    from backends.diffusion.local import _chat
    from backends.diffusion.vision import decode_image

    engine = backend.load()
    config = engine.generation_config({"max_new_tokens": CANVAS})
    done = [threading.Event() for _ in range(3)]
    logs: list[list] = [[], [], []]
    jobs = []
    for i, urls in enumerate([[_data_url(color=(0, 0, 0))], [], [_data_url((20, 90), color=(255, 255, 255))]]):
        ids = engine.encode(_chat(_ask(*urls)))
        images = None
        if urls:
            ids, images = engine.add_images(ids, [decode_image(u) for u in urls])

        def emit(event, i=i):
            logs[i].append(event)
            if event[0] in ("done", "cancelled", "error"):
                done[i].set()

        jobs.append(EngineJob(input_ids=ids, generation_config=config, emit=emit, images=images))
    before = engine.stats["batches"]
    with _VisionCalls(backend) as vision:
        engine.submit_all(jobs)
        assert all(d.wait(120) for d in done)
    assert [log[-1][0] for log in logs] == ["done", "done", "done"], logs
    assert engine.stats["batches"] == before + 1 and {log[-1][1].batch_size for log in logs} == {3}
    assert vision.shapes == [(2, PATCHES, PATCH_PIXELS)]  # both rows' images, in one pass of the tower


@pytest.mark.torch
def test_an_http_image_is_refused_by_the_engine(backend, network_guard):
    url = "https://example.com/cat.png"
    with pytest.raises(UsageError, match="does not fetch image URLs"):
        asyncio.run(backend.complete(Request(messages=_ask(url), max_tokens=CANVAS)))
    assert not network_guard


@pytest.mark.torch
def test_a_checkpoint_without_an_image_processor_is_text_only(text_only_path):
    from backends.diffusion.local import DiffusionLocalBackend

    b = DiffusionLocalBackend(_settings(text_only_path))
    try:
        assert not b.current_capabilities().vision
        b.load()
        assert not b.current_capabilities().vision and b.load().loaded.image_processor is None
        with pytest.raises(Unsupported, match="cannot take images") as caught:
            asyncio.run(b.complete(Request(messages=_ask(_data_url()), max_tokens=CANVAS)))
        assert caught.value.need == "vision"
    finally:
        asyncio.run(b.aclose())


@pytest.mark.torch
def test_the_router_sends_images_to_the_checkpoint_that_sees(tiny_path, text_only_path, backend):
    from backends.diffusion.local import DiffusionLocalBackend
    from router.core import Router

    def spec(path):
        return {"kind": "diffusion-local", "model": str(path), "decoding": "diffusion", "canvas_length": CANVAS}

    config = {"backends": {"blind": spec(text_only_path), "seeing": spec(tiny_path)},
              "routing": {"tiers": [{"name": "all", "backends": ["blind", "seeing"]}]}}
    blind = DiffusionLocalBackend(_settings(text_only_path, "blind"))  # never loaded: the router decides from files
    with Router.from_config(config, backends={"blind": blind, "seeing": backend}, log=False) as router:
        assert set(router.decide([{"role": "user", "content": "hello"}]).candidates) == {"blind", "seeing"}
        with _VisionCalls(backend) as vision:
            result = router.complete(_ask(_data_url()), max_tokens=CANVAS)
    assert result.decision.candidates == ("seeing",) and result.decision.chosen == "seeing"
    assert vision.shapes == [(1, PATCHES, PATCH_PIXELS)] and blind.stats is None


@pytest.fixture(scope="module")
def engine_server(backend):
    from router.engine_server import EngineServer

    with EngineServer(backend, port=0, served_name="tiny-dg") as server:
        yield server


@pytest.mark.integration
@pytest.mark.torch
@pytest.mark.integration
def test_the_engine_server_takes_inline_images_and_refuses_links(engine_server, network_guard):
    url = f"{engine_server.base_url}/chat/completions"
    ok = httpx.post(url, json={"messages": _ask(_data_url()), "max_tokens": CANVAS}, timeout=120)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"].strip()
    link = {"messages": _ask("http://example.com/a.png")}
    refused = httpx.post(url, json=link, timeout=60)
    assert refused.status_code == 400 and "does not fetch image URLs" in refused.json()["error"]["message"]
    # The engine server is route serve's request flow: a stream waits for its first content, so a
    # request refused before generation starts is a 400 there too, not an error event in a 200.
    streamed = httpx.post(url, json={**link, "stream": True}, timeout=60)
    assert streamed.status_code == 400 and streamed.json()["error"]["code"] == "invalid_request"
    assert "does not fetch" in streamed.json()["error"]["message"]
    assert not network_guard


@pytest.mark.integration
@pytest.mark.torch
@pytest.mark.integration
def test_route_serve_routes_an_image_to_the_engine_and_refuses_links_with_a_400(tiny_path, text_only_path, backend,
                                                                                 network_guard):
    from backends.diffusion.local import DiffusionLocalBackend
    from router.core import Router
    from router.server import RouteServer

    def spec(path):
        return {"kind": "diffusion-local", "model": str(path), "decoding": "diffusion", "canvas_length": CANVAS}

    config = {"backends": {"blind": spec(text_only_path), "seeing": spec(tiny_path)},
              "routing": {"tiers": [{"name": "all", "backends": ["blind", "seeing"]}]}}
    blind = DiffusionLocalBackend(_settings(text_only_path, "blind"))
    with Router.from_config(config, backends={"blind": blind, "seeing": backend}, log=False) as router:
        with RouteServer(router) as server:
            url = f"{server.base_url}/chat/completions"
            ok = httpx.post(url, json={"model": "auto", "messages": _ask(_data_url()), "max_tokens": CANVAS},
                            timeout=120)
            assert ok.status_code == 200, ok.text
            assert ok.headers["x-route-answered-by"] == "local" and ok.json()["choices"][0]["message"]["content"]
            link = {"model": "auto", "messages": _ask("https://example.com/a.png")}
            for stream in (False, True):
                refused = httpx.post(url, json={**link, "stream": stream}, timeout=60)
                assert refused.status_code == 400, refused.text
                assert "does not fetch image URLs" in refused.json()["error"]["message"]
    assert not network_guard
