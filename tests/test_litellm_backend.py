"""The litellm backend through real litellm (`openai/` provider) against the simulated server."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from backends import build_backend
from backends.base import BackendSettings
from backends.errors import AuthError, BackendTimeout, BackendUnavailable, RateLimited
from backends.types import FinalChunk, Price, Request, TextChunk
from tests.helpers import call
from tests.waiting import LATE_S

pytestmark = pytest.mark.integration

PROMPT = Request(messages=[{"role": "user", "content": "Name three prime numbers."}])


def _backend(sim, **settings):
    defaults = dict(name="hosted", model="openai/sim-hosted", base_url=sim.base_url, backoff_initial_s=0.01,
                    api_key_env="SIM_LITELLM_KEY")
    return build_backend("litellm", BackendSettings(**{**defaults, **settings}))


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("SIM_LITELLM_KEY", "sk-simulated")


async def test_complete_through_litellm(sim):
    completion = await _backend(sim, price=Price(1.0, 2.0)).complete(PROMPT)
    assert completion.text.startswith("[simulated sim-hosted]")
    assert completion.metadata.get("simulated") is True
    assert completion.usage.output_tokens > 0
    expected = (completion.usage.input_tokens * 1.0 + completion.usage.output_tokens * 2.0) / 1e6
    assert completion.cost_usd == pytest.approx(expected)
    assert sim.stats("sim-hosted")["requests"] == 1


async def test_stream_through_litellm(sim):
    chunks = [c async for c in _backend(sim).stream(PROMPT)]
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert text == final.completion.text and text.startswith("[simulated")
    assert final.completion.usage.output_tokens > 0
    assert final.completion.timings.ttft_s is not None
    assert final.completion.metadata.get("simulated") is True


async def test_server_error_is_retried_by_us_not_by_litellm(sim):
    sim.set_faults("sim-hosted", ["500", None])
    completion = await call(_backend(sim, max_retries=1), PROMPT)
    assert completion.text
    assert sim.stats("sim-hosted")["requests"] == 2  # exactly one retry: litellm's own are off


async def test_persistent_server_error_becomes_unavailable(sim):
    sim.set_faults("sim-hosted", ["500", "500"])
    with pytest.raises(BackendUnavailable):
        await call(_backend(sim, max_retries=1), PROMPT)


async def test_rate_limit_is_translated(sim):
    sim.update_profile("sim-hosted", retry_after_s=7)
    sim.set_faults("sim-hosted", ["429"])
    with pytest.raises(RateLimited):
        await _backend(sim, max_retries=0).complete(PROMPT)


async def test_hang_is_cut_at_the_deadline(sim):
    sim.set_faults("sim-hosted", ["hang"])
    started = time.perf_counter()
    with pytest.raises(BackendTimeout):
        await _backend(sim, max_retries=0).complete(Request(messages=PROMPT.messages, timeout_s=0.5))
    assert time.perf_counter() - started < 0.5 + LATE_S  # the hang lasts forever


async def test_missing_key_fails_without_importing_litellm(sim, monkeypatch):
    monkeypatch.delenv("SIM_LITELLM_KEY")
    with pytest.raises(AuthError, match="SIM_LITELLM_KEY"):
        await _backend(sim).complete(PROMPT)


def test_building_a_litellm_backend_does_not_import_litellm():
    code = (
        "import sys\n"
        "from backends import build_backend\nfrom backends.base import BackendSettings\n"
        "build_backend('litellm', BackendSettings(name='x', model='anthropic/claude'))\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
