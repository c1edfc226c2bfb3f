"""The routing policy (pure) and how the Router explains it."""

from __future__ import annotations

import dataclasses

import pytest

from backends.errors import UsageError
from backends.types import Price
from policies.ladder import Tier
from policies.latency import LatencyModel, Prior
from policies.selection import RouteInputs, plan_route
from router.core import Router

pytestmark = pytest.mark.unit

TIERS = (
    Tier("local", 0.4, ("local-diffusion", "hosted-diffusion")),
    Tier("strong", None, ("frontier", "mid")),
)


def measured(decoding: str, first_s: float, unit_s: float, *, canvases: int = 1, n: int = 30) -> LatencyModel:
    """A model that has seen `n` identical calls."""
    model = LatencyModel(decoding)
    for _ in range(n):
        if decoding == "diffusion":
            model.observe(first_s + (canvases - 1) * unit_s, first_s=first_s, output_tokens=100, canvases=canvases,
                          now=1000.0)
        else:
            model.observe(first_s + 99 * unit_s, first_s=first_s, output_tokens=100, now=1000.0)
    return model


def models() -> dict[str, LatencyModel]:
    return {
        "local-diffusion": measured("diffusion", 0.30, 0.25),  # free, 0.3 s per answer
        "hosted-diffusion": measured("diffusion", 0.15, 0.10),  # cheap, faster
        "frontier": measured("autoregressive", 0.8, 1 / 60),  # ~2.4 s, expensive
        "mid": measured("autoregressive", 0.5, 1 / 90),  # ~1.6 s, cheaper than frontier
    }


PRICES = {
    "local-diffusion": Price(0, 0),
    "hosted-diffusion": Price(0.25, 0.75),
    "frontier": Price(3, 15),
    "mid": Price(0.6, 2.2),
}


def inputs(**changes) -> RouteInputs:
    base = dict(models=models(), prices=PRICES, input_tokens=100, max_tokens=100, now=1001.0)
    return RouteInputs(**{**base, **changes})


def test_cheapest_backend_of_the_tier_that_meets_the_deadline():
    plan = plan_route(TIERS, 0, inputs(deadline_s=1.0))
    assert plan.names[0] == "local-diffusion"
    plan = plan_route(TIERS, 1, inputs(deadline_s=5.0))
    assert plan.names[0] == "mid"  # cheaper than frontier, both in time
    assert "cheapest" in plan.why


def test_a_tight_deadline_moves_to_the_faster_backend_of_the_tier():
    plan = plan_route(TIERS, 0, inputs(deadline_s=0.25))
    assert plan.names[0] == "hosted-diffusion"
    rows = {c["backend"]: c for c in plan.as_dict()["candidates"]}
    assert rows["local-diffusion"]["meets_deadline"] is False
    assert rows["hosted-diffusion"]["meets_deadline"] is True


def test_escalates_to_a_stronger_tier_and_downgrades_only_when_asked_and_said():
    # Stronger first: from the local tier, when local cannot make it but the strong tier can.
    slow_local = {**models(), "local-diffusion": measured("diffusion", 3.0, 1.0),
                  "hosted-diffusion": measured("diffusion", 3.0, 1.0)}
    plan = plan_route(TIERS, 0, inputs(models=slow_local, deadline_s=2.0))
    assert plan.names[0] == "mid"
    assert "escalated to tier 'strong'" in plan.why and plan.downgrade is None
    # The strong tier's backends are too slow for 0.5 s; a weaker tier would make it.
    plan = plan_route(TIERS, 1, inputs(deadline_s=0.5, on_deadline_risk="downgrade"))
    assert plan.names[0] == "local-diffusion"
    assert plan.why.startswith("DOWNGRADE to tier 'local'")
    assert plan.downgrade is not None and "no backend of tier 'strong' or above" in plan.downgrade
    assert plan.candidates[0].weaker and plan.as_dict()["candidates"][0]["downgrade"] is True
    # The default keeps the quality: the tier's fastest is tried, weaker tiers only after it failed.
    plan = plan_route(TIERS, 1, inputs(deadline_s=0.5))
    assert plan.on_deadline_risk == "best-effort" and plan.downgrade is None
    assert plan.names[:2] == ("mid", "frontier")
    assert [c.weaker for c in plan.candidates] == [False, False, True, True]
    assert "best effort at this quality: mid has the smallest p95" in plan.why
    # A tier's own setting wins over routing's.
    strict = (TIERS[0], dataclasses.replace(TIERS[1], on_deadline_risk="fail"))
    refused = plan_route(strict, 1, inputs(deadline_s=0.5, on_deadline_risk="downgrade"))
    assert refused.refused is not None and "0.50s deadline" in refused.refused
    assert refused.names == ("mid", "frontier")  # `fail` never lists a weaker tier


def test_when_nothing_can_meet_the_deadline_the_smallest_p95_goes_first():
    plan = plan_route(TIERS, 1, inputs(deadline_s=0.01, on_deadline_risk="downgrade"))
    assert plan.names[0] == "hosted-diffusion"
    assert "has the smallest p95" in plan.why and plan.downgrade is not None
    plan = plan_route(TIERS, 1, inputs(deadline_s=0.01))
    assert plan.names[0] == "mid" and plan.downgrade is None


def test_prefer_fast_and_best():
    assert plan_route(TIERS, 0, inputs(prefer="fast")).names[0] == "hosted-diffusion"
    assert plan_route(TIERS, 1, inputs(prefer="fast")).names[0] == "mid"
    best = plan_route(TIERS, 0, inputs(prefer="best", deadline_s=10.0))
    assert best.names[0] == "mid"  # the strongest tier that can meet the deadline
    best_tight = plan_route(TIERS, 0, inputs(prefer="best", deadline_s=0.5))
    assert best_tight.names[0] == "local-diffusion"


def test_near_equal_costs_tie_and_the_faster_wins():
    prices = {**PRICES, "frontier": Price(0.6, 2.3)}  # within 10% of mid, but slower
    assert plan_route(TIERS, 1, inputs(prices=prices)).names[0] == "mid"
    faster_frontier = {**models(), "frontier": measured("autoregressive", 0.1, 1 / 500)}
    plan = plan_route(TIERS, 1, inputs(prices=prices, models=faster_frontier))
    assert plan.names[0] == "frontier"
    assert plan_route(TIERS, 1, inputs(prices=prices, models=faster_frontier,
                                       cost_tolerance=0.0)).names[0] == "mid"


def test_open_breakers_go_last_and_half_open_ones_are_probed():
    plan = plan_route(TIERS, 0, inputs(blocked={"local-diffusion"}))
    assert plan.names[0] == "hosted-diffusion"
    assert plan.names[-1] == "local-diffusion"
    plan = plan_route(TIERS, 0, inputs(deadline_s=0.25, half_open={"local-diffusion"}, hedge=True))
    assert plan.names[:2] == ("local-diffusion", "hosted-diffusion")
    assert "half-open" in plan.why


def test_untried_backends_are_explored_once_with_a_quick_hedge():
    fresh = {**models(), "hosted-diffusion": LatencyModel("diffusion", prior=Prior(canvas_s=0.2))}
    plan = plan_route(TIERS, 0, inputs(models=fresh, hedge=True))
    assert plan.names[:2] == ("hosted-diffusion", "local-diffusion")
    assert plan.as_dict()["explore"] == "hosted-diffusion"
    # backed up as soon as the usual winner would have answered, not at the untried one's p95
    winner_first = models()["local-diffusion"].predict(100).first_p50_s
    assert plan.as_dict()["hedge_after_s"]["hosted-diffusion"] == pytest.approx(winner_first, abs=1e-4)
    again = plan_route(TIERS, 0, inputs(models=fresh, hedge=True, exploring={"hosted-diffusion"}))
    assert again.names[0] == "local-diffusion" and again.as_dict()["explore"] is None


def test_stale_backends_are_explored_at_the_configured_rate():
    stale = inputs(now=1000.0 + 400, stale_after_s=300, explore_rate=0.1, hedge=True)
    assert plan_route(TIERS, 0, stale).as_dict()["explore"] is None  # roll 1.0: never
    rolled = inputs(now=1000.0 + 400, stale_after_s=300, explore_rate=0.1, explore_roll=0.05, hedge=True)
    assert plan_route(TIERS, 0, rolled).as_dict()["explore"] == "hosted-diffusion"


def test_details_explain_every_candidate():
    plan = plan_route(TIERS, 0, inputs(deadline_s=1.0, hedge=True))
    rows = plan.as_dict()["candidates"]
    assert [r["backend"] for r in rows] == list(plan.names)
    for row in rows:
        assert row["p50_s"] <= row["p95_s"]
        assert {"cost_usd", "tier", "meets_deadline", "breaker", "samples"} <= set(row)
    costs = {r["backend"]: r["cost_usd"] for r in rows}
    assert costs["local-diffusion"] == 0.0 < costs["hosted-diffusion"] < costs["mid"] < costs["frontier"]
    assert set(plan.as_dict()["hedge_after_s"]) == set(plan.names)


# -- through the Router ---------------------------------------------------------------------

def fake_config(**routing) -> dict:
    backends = {
        "local": {"kind": "fake", "model": "local-m", "decoding": "diffusion", "latency": {"canvas_ms": 250}},
        "hosted": {"kind": "fake", "model": "hosted-m", "decoding": "diffusion", "price": {"input": 0.25, "output": 0.75},
                   "latency": {"ttft_ms": 40, "canvas_ms": 60}},
        "frontier": {"kind": "fake", "model": "big", "price": {"input": 3, "output": 15},
                     "latency": {"ttft_ms": 900, "tokens_per_s": 60}},
    }
    tiers = [{"name": "small", "below": 0.5, "backends": ["local", "hosted"]}, {"name": "big", "backends": ["frontier"]}]
    return {"backends": backends, "routing": {"tiers": tiers, **routing}}


def test_router_decision_carries_predictions_and_honours_prefer():
    router = Router.from_config(fake_config())
    first = router.decide([{"role": "user", "content": "hi"}], deadline_s=2.0)
    assert first.candidates[:2] == ("hosted", "local")  # nothing measured yet: explore the other one
    assert first.details["explore"] == "hosted"
    for name in ("local", "hosted"):
        router.latency.model(name).observe(0.2, output_tokens=50, canvases=1, now=router.latency._clock())
    cheap = router.decide([{"role": "user", "content": "hi"}], deadline_s=2.0)
    assert cheap.chosen == "local" and cheap.details["explore"] is None
    assert {c["backend"] for c in cheap.details["candidates"]} == {"local", "hosted", "frontier"}
    assert "tier 'small'" in cheap.reason and "cheapest" in cheap.reason
    fast = router.decide([{"role": "user", "content": "hi"}], prefer="fast")
    assert fast.chosen == "hosted"
    configured = Router.from_config(fake_config(prefer="fast"))
    decision = configured.decide([{"role": "user", "content": "hi"}])
    assert decision.details["prefer"] == "fast"
    assert decision.candidates[:2] == ("local", "hosted")  # local explored (untried), hosted the winner
    assert "hosted is the fastest (p50) candidate" in decision.reason
    with pytest.raises(UsageError, match="prefer must be fast, cheap or best"):
        router.decide([{"role": "user", "content": "hi"}], prefer="quick")
    assert cheap.as_dict()["details"]["candidates"][0]["backend"] == "local"  # JSON-able for --explain --json


def test_without_priors_an_unmeasured_tier_is_tried_not_abandoned():
    # Nothing known about the strong tier; the local tier is measured and fast. Even when
    # downgrading is allowed, the prompt's tier is tried until measurements rule it out.
    unmeasured = {**models(), "frontier": LatencyModel(), "mid": LatencyModel()}
    for mode in ("best-effort", "downgrade", "fail"):
        plan = plan_route(TIERS, 1, inputs(models=unmeasured, deadline_s=0.5, on_deadline_risk=mode))
        assert not plan.candidates[0].weaker and plan.downgrade is None and plan.refused is None, mode
        assert "may meet the 0.50s deadline (untried)" in plan.why
        assert plan.explored in ("frontier", "mid")  # the other untried one is measured too
    rows = {c["backend"]: c for c in plan.as_dict()["candidates"]}
    assert rows["mid"]["known"] is False and rows["mid"]["meets_deadline"] is False
    assert rows["mid"]["could_meet_deadline"] is True
    # Once measured too slow, the evidence decides: now the mode applies.
    measured_slow = {**models(), "frontier": measured("autoregressive", 0.8, 1 / 60),
                     "mid": measured("autoregressive", 0.5, 1 / 90)}
    plan = plan_route(TIERS, 1, inputs(models=measured_slow, deadline_s=0.5, on_deadline_risk="downgrade"))
    assert plan.candidates[0].weaker and plan.downgrade is not None


def test_a_backend_with_few_samples_near_the_deadline_is_given_the_benefit_of_the_doubt():
    one_sample = {**models(), "mid": measured("autoregressive", 0.5, 1 / 90, n=1),
                  "frontier": measured("autoregressive", 5.0, 1 / 60)}
    p = one_sample["mid"].predict(100)
    deadline = 1.05 * p.optimistic_s  # inside its uncertainty band, below its measured p95
    plan = plan_route(TIERS, 1, inputs(models=one_sample, deadline_s=deadline, on_deadline_risk="downgrade"))
    assert plan.names[0] == "mid" and "1 sample" in plan.why and plan.downgrade is None
    settled = {**one_sample, "mid": measured("autoregressive", 0.5, 1 / 90, n=200)}
    q = settled["mid"].predict(100)
    assert q.optimistic_s > deadline  # with 200 samples the same backend is known to miss it
    plan = plan_route(TIERS, 1, inputs(models=settled, deadline_s=deadline, on_deadline_risk="downgrade"))
    assert plan.downgrade is not None
