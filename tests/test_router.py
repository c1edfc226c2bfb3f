"""The Router's Python API: decisions, fallback, deadlines, streams and the sync wrappers.

Pure routing logic runs on the in-package FakeBackend; one end-to-end test goes through the
simulated server with the real HTTP backend."""

from __future__ import annotations

import asyncio

import pytest

from backends.base import BackendSettings
from backends.errors import (
    AllBackendsFailed,
    BackendTimeout,
    BackendUnavailable,
    BadRequest,
    UsageError,
)
from backends.fake import FakeBackend, FakeStep
from backends.types import FinalChunk, TextChunk
from router import Router
from tests.waiting import LATE_S

pytestmark = pytest.mark.unit

CONFIG = {
    "backends": {
        "local": {"kind": "fake", "model": "local-model"},
        "hosted": {"kind": "fake", "model": "hosted-model", "price": {"input": 3, "output": 15}},
    },
    "routing": {
        "scorer": {"kind": "length", "threshold_chars": 100},
        "tiers": [
            {"name": "cheap", "below": 0.5, "backends": ["local"]},
            {"name": "strong", "backends": ["hosted"]},
        ],
    },
}
SHORT, LONG = "hi", "x" * 500


def _router(local_steps=(), hosted_steps=(), config=CONFIG, **kwargs) -> tuple[Router, FakeBackend, FakeBackend]:
    # No retries: these tests are about fallback; retries have their own tests (test_call_path.py, test_retry_policy.py).
    local = FakeBackend(BackendSettings(name="local", model="local-model", max_retries=0), steps=list(local_steps))
    hosted = FakeBackend(BackendSettings(name="hosted", model="hosted-model", max_retries=0), steps=list(hosted_steps))
    return Router.from_config(config, backends={"local": local, "hosted": hosted}, **kwargs), local, hosted


async def test_short_prompt_goes_local_long_prompt_goes_hosted():
    router, local, hosted = _router()
    short = await router.acomplete(SHORT)
    long = await router.acomplete(LONG)
    assert short.backend == "local" and short.decision.tier == "cheap"
    assert long.backend == "hosted" and long.decision.tier == "strong"
    assert len(local.calls) == 1 and len(hosted.calls) == 1


def test_explain_calls_no_model_and_gives_reasons():
    router, local, hosted = _router()
    decision = router.explain(LONG)
    assert decision.chosen == "hosted" and decision.score.value > 0.5
    assert "tier 'strong'" in decision.reason and "local" in decision.candidates
    assert local.calls == [] and hosted.calls == []
    assert decision.as_dict()["top_features"]


async def test_failure_falls_back_to_the_next_tier():
    router, local, hosted = _router(local_steps=[FakeStep(error=BackendUnavailable("down", backend="local"))])
    result = await router.acomplete(SHORT)
    assert result.backend == "hosted"
    assert [type(e) for e in result.failures] == [BackendUnavailable]


async def test_all_failing_raises_a_group_of_every_error():
    router, _, _ = _router(
        local_steps=[FakeStep(error=BackendUnavailable("down", backend="local"))],
        hosted_steps=[FakeStep(error=BadRequest("bad", backend="hosted"))],
    )
    with pytest.raises(AllBackendsFailed) as caught:
        await router.acomplete(SHORT)
    assert [type(e) for e in caught.value.exceptions] == [BackendUnavailable, BadRequest]
    assert "tried local, hosted" in str(caught.value) and caught.value.exit_code == 3


async def test_forced_model_skips_scoring_and_fallback():
    router, local, hosted = _router(hosted_steps=[FakeStep(error=BackendUnavailable("down", backend="hosted"))])
    with pytest.raises(AllBackendsFailed):
        await router.acomplete(SHORT, model="hosted")
    assert local.calls == []


def test_unknown_model_is_a_usage_error_listing_names():
    router, _, _ = _router()
    with pytest.raises(UsageError, match="unknown model 'nope'.*local, hosted"):
        router.explain(SHORT, model="nope")


async def test_deadline_bounds_the_whole_request_across_fallbacks():
    slow = FakeStep(text="late", delay_s=30)
    router, _, hosted = _router(local_steps=[slow])
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises((AllBackendsFailed, BackendTimeout)):
        await router.acomplete(SHORT, deadline_s=0.3)
    assert loop.time() - started < 0.3 + LATE_S  # not the slow backend's 30 s


async def test_options_reach_the_backend():
    router, local, _ = _router()
    await router.acomplete(SHORT, max_tokens=12, temperature=0.1, stop="END", seed=7)
    request = local.calls[0]
    assert (request.max_tokens, request.temperature, request.stop, request.extra) == (12, 0.1, ["END"], {"seed": 7})


async def test_stream_decision_first_then_chunks_then_result():
    router, _, _ = _router(local_steps=[FakeStep(text="one two three")])
    stream = router.astream(SHORT)
    assert stream.decision.chosen == "local" and stream.result is None
    chunks = [c async for c in stream]
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "one two three"
    assert isinstance(chunks[-1], FinalChunk) and stream.result.text == "one two three"


async def test_stream_falls_back_before_the_first_text():
    router, _, hosted = _router(local_steps=[FakeStep(error=BackendUnavailable("down", backend="local"))])
    stream = router.astream(SHORT)
    chunks = [c async for c in stream]
    assert chunks[-1].completion.backend == "hosted" and len(hosted.calls) == 1


async def test_request_observers_see_every_outcome():
    outcomes: list = []
    router, _, _ = _router(local_steps=[FakeStep(error=BackendUnavailable("down", backend="local"))],
                           hosted_steps=[FakeStep(error=BackendUnavailable("down", backend="hosted"))],
                           request_observers=[outcomes.append])
    with pytest.raises(AllBackendsFailed):
        await router.acomplete(SHORT)
    await router.acomplete(LONG)
    assert [o.error is not None for o in outcomes] == [True, False]
    assert outcomes[1].result.backend == "hosted" and outcomes[0].source == "api"


def test_sync_wrappers_work_outside_a_loop_and_reuse_it():
    router, local, _ = _router()
    with router:
        first = router.complete(SHORT)
        text = "".join(c.text for c in router.stream(SHORT) if isinstance(c, TextChunk))
    assert first.backend == "local" and text.startswith("[fake local]")
    assert len(local.calls) == 2


async def test_sync_wrapper_refuses_inside_a_running_loop():
    router, _, _ = _router()
    with pytest.raises(UsageError, match="await router.acomplete"):
        router.complete(SHORT)


@pytest.mark.integration
async def test_end_to_end_over_http_with_the_simulator(sim):
    config = {
        "backends": {"local": {"kind": "openai", "model": "google/diffusiongemma-26B-A4B-it", "base_url": sim.base_url,
                               "decoding": "diffusion"}},
        "routing": {"tiers": [{"name": "all", "backends": ["local"]}]},
    }
    sim.update_profile("google/diffusiongemma-26B-A4B-it", canvas_s=0.01, ttft_s=0.0)
    async with Router.from_config(config) as router:
        result = await router.acomplete("Summarise the plot of Hamlet in one line.")
    assert result.text.startswith("[simulated google/diffusiongemma-26B-A4B-it]")
    assert result.completion.diffusion.canvases == 1
    assert result.as_dict()["simulated"] is True


def test_candidates_that_cannot_take_the_request_are_left_out():
    from backends.errors import Unsupported
    from router.deciding import Needs

    config = {
        "backends": {"small": {"kind": "openai", "model": "s", "context_window": 50},
                     "plain": {"kind": "fake", "model": "p"}},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 10_000},
                    "tiers": [{"name": "low", "below": 0.5, "backends": ["small"]}, {"name": "high", "backends": ["plain"]}]},
    }
    router = Router.from_config(config, log=False)

    def chosen(messages, **extra):
        return router.decide(messages, needs=Needs.of(messages, extra, None)).chosen

    short = [{"role": "user", "content": "hi"}]
    assert chosen(short) == "small"
    # A prompt longer than small's context window goes to the backend that can hold it (pre-call check).
    assert chosen([{"role": "user", "content": "x" * 400}]) == "plain"
    # Images only to a vision-capable backend; tools only to one that takes them.
    image = [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]
    assert chosen(image) == "small"
    with pytest.raises(Unsupported, match="model 'plain' cannot take `tools`; ask for one that can: small") as caught:
        router.decide(short, model="plain", needs=Needs(tools=True))
    assert caught.value.need == "tools"
    with pytest.raises(Unsupported, match="none of the backends") as none:
        router.decide(image + [{"role": "user", "content": "x" * 400}], needs=Needs(vision=True, tokens=400))
    assert none.value.need in ("vision", "context")
