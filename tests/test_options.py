"""The Python API says no: an option it does not know is a TypeError naming the one meant,
provider parameters go through `extra=` alone, and `max_cost_usd` refuses to overspend."""

from __future__ import annotations

import pytest

from backends.base import BackendSettings
from backends.errors import CostLimitExceeded, UsageError
from backends.fake import FakeBackend
from backends.types import Price
from router import Router

pytestmark = pytest.mark.unit

CONFIG = {
    "backends": {
        "local": {"kind": "fake", "model": "local-model", "price": {"input": 1, "output": 1}},
        "hosted": {"kind": "fake", "model": "hosted-model", "price": {"input": 3, "output": 15}},
    },
    "routing": {
        "scorer": {"kind": "length", "threshold_chars": 100},
        "tiers": [{"name": "cheap", "below": 0.5, "backends": ["local"]}, {"name": "strong", "backends": ["hosted"]}],
    },
    "log": {"enabled": False},
}


def _router():
    local = FakeBackend(BackendSettings(name="local", model="local-model", max_retries=0, price=Price(1, 1)))
    hosted = FakeBackend(BackendSettings(name="hosted", model="hosted-model", max_retries=0, price=Price(3, 15)))
    return Router.from_config(CONFIG, backends={"local": local, "hosted": hosted}), local, hosted


async def test_the_typo_call_raises_naming_deadline_s_and_sends_nothing():
    router, local, hosted = _router()
    with pytest.raises(TypeError) as caught:
        await router.acomplete("Say hi", deadline=0.5, budget=3, timeout=1)  # type: ignore[call-arg]
    message = str(caught.value)
    assert "'deadline' (did you mean 'deadline_s'?)" in message
    assert "'budget' (did you mean 'max_cost_usd'?)" in message and "'timeout' (did you mean 'deadline_s'?)" in message
    assert "extra=" in message
    assert local.calls == [] and hosted.calls == []


@pytest.mark.parametrize("method", ["complete", "stream", "explain"])
def test_every_entry_point_checks_its_options_under_its_own_name(method):
    router, local, _ = _router()
    with pytest.raises(TypeError, match=rf"Router\.{method}\(\) got unexpected keyword argument 'max_token' "
                                        r"\(did you mean 'max_tokens'\?\)"):
        getattr(router, method)("hi", max_token=5)
    assert local.calls == []


async def test_astream_refuses_before_deciding():
    router, _, _ = _router()
    with pytest.raises(TypeError, match="'temprature'"):
        router.astream("hi", temprature=0.2)  # type: ignore[call-arg]


async def test_provider_parameters_reach_the_request_through_names_and_extra():
    router, local, _ = _router()
    await router.acomplete("hi", seed=7, top_p=0.5, extra={"logit_bias": {"1": 2}, "diffusing": True})
    assert local.calls[0].extra == {"seed": 7, "top_p": 0.5, "logit_bias": {"1": 2}, "diffusing": True}


async def test_extra_may_not_carry_a_router_option_or_repeat_a_named_one():
    router, local, _ = _router()
    with pytest.raises(TypeError, match="'deadline_s' in extra= is the router's own option"):
        await router.acomplete("hi", extra={"deadline_s": 1})
    with pytest.raises(TypeError, match="'seed' was given both"):
        await router.acomplete("hi", seed=1, extra={"seed": 2})
    assert local.calls == []


async def test_values_of_the_wrong_type_are_refused():
    router, _, _ = _router()
    with pytest.raises(TypeError, match="deadline_s must be a number"):
        await router.acomplete("hi", deadline_s="2s")  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="max_cost_usd must not be negative"):
        await router.acomplete("hi", max_cost_usd=-1)


async def test_max_cost_usd_leaves_out_candidates_predicted_to_cost_more():
    """A long prompt scores for the strong tier; its predicted cost is over the limit, so the
    cheap backend answers and the decision says why."""
    router, local, hosted = _router()
    prompt = "x" * 4000  # ~1000 input tokens: hosted $0.003 + 100 * $15/M, local $0.001 + 100 * $1/M
    result = await router.acomplete(prompt, max_tokens=100, max_cost_usd=0.002)
    assert result.backend == "local" and hosted.calls == []
    assert "over max_cost_usd $0.002000, left out: hosted" in result.decision.reason


async def test_max_cost_usd_below_every_prediction_calls_nothing():
    router, local, hosted = _router()
    with pytest.raises(CostLimitExceeded, match=r"below every candidate's predicted cost \(cheapest: local"):
        await router.acomplete("x" * 4000, max_tokens=100, max_cost_usd=0.0001)
    assert local.calls == [] and hosted.calls == []


def test_explain_takes_the_same_options():
    router, _, _ = _router()
    with pytest.raises(UsageError, match="prefer must be"):
        router.explain("hi", prefer="fastest")
    assert router.explain("hi", max_cost_usd=1.0, max_tokens=10).chosen == "local"
