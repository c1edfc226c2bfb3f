"""Drafts over HTTP: the simulator emulates Mercury's `diffusing` stream for diffusion profiles,
the openai backend turns it into DraftChunks, and `route --watch` against the simulator shows
the canvas denoising step by step (a captured terminal), then the same answer a plain run prints."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from backends.base import BackendSettings
from backends.openai_http import OpenAIBackend
from backends.simulator.drafts import MASK, STEPS
from backends.types import DraftChunk, FinalChunk, Request, TextChunk
from router.cli.app import app

pytestmark = pytest.mark.integration

MODEL = "google/diffusiongemma-26B-A4B-it"
# rich renders Live updates only to a terminal: these make the captured stream count as one.
TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "2000", "LINES": "50"}


@pytest.fixture
def config(sim, tmp_path):
    sim.update_profile(MODEL, ttft_s=0.0, canvas_s=0.01, answer_tokens=300)
    path = tmp_path / "cfg.yaml"
    path.write_text(f"""\
backends:
  dg: {{kind: openai, model: {MODEL}, base_url: "{sim.base_url}", decoding: diffusion}}
routing:
  tiers: [{{name: all, backends: [dg]}}]
""")
    return path


async def test_diffusing_stream_becomes_drafts_then_the_answer(sim):
    sim.update_profile(MODEL, ttft_s=0.0, canvas_s=0.0, answer_tokens=300)
    backend = OpenAIBackend(BackendSettings(name="dg", model=MODEL, base_url=sim.base_url, decoding="diffusion"))
    chunks = [c async for c in backend.stream(Request(messages=[{"role": "user", "content": "hi"}],
                                                      extra={"diffusing": True}))]
    await backend.aclose()
    drafts = [c.text for c in chunks if isinstance(c, DraftChunk)]
    texts = [c.text for c in chunks if isinstance(c, TextChunk)]
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and len(drafts) == 2 * STEPS  # two canvases of 256
    masked = [d.count(MASK) for d in drafts]
    assert masked[0] > masked[STEPS - 1] == 0 and masked[STEPS] > 0 and masked[-1] == 0
    assert texts == [drafts[-1]] and final.completion.text == drafts[-1]
    assert final.completion.usage.output_tokens == 300


def test_route_watch_shows_successive_drafts(config):
    runner = CliRunner()
    plain = runner.invoke(app, ["-c", str(config), "--no-log", "--no-stream", "why is the sky blue"])
    watched = runner.invoke(app, ["-c", str(config), "--no-log", "--watch", "why is the sky blue"], env=TERMINAL)
    assert watched.exit_code == 0, watched.stderr
    assert watched.stdout == plain.stdout  # drafts never reach stdout
    frames = re.findall(r"denoising step (\d+)\x1b\[0m\n\x1b\[33m([^\x1b]*)", watched.stderr)
    # A diffusing stream does not say where canvases start: the view counts its drafts.
    assert [int(step) for step, _ in frames] == list(range(1, 2 * STEPS + 1))
    masked = [draft.count(MASK) for _, draft in frames]
    assert masked[:STEPS] == sorted(masked[:STEPS], reverse=True) and masked[0] > masked[STEPS - 1] == 0
    assert masked[STEPS] > 0 and masked[-1] == 0  # the second canvas denoises after the first
