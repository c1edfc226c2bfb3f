"""The token bucket (policies/rate_limit.py) and the routing policy's view of a backend at its
limit, with time handed in: nothing here reads a clock."""

from __future__ import annotations

import pytest

from policies.ladder import Tier
from policies.latency import LatencyModel
from policies.rate_limit import Buckets, Limited, RateLimits, TokenBucket, request_cost
from policies.selection import RouteInputs, plan_route

pytestmark = pytest.mark.unit


def test_a_bucket_allows_a_burst_of_the_limit_then_one_every_60_over_limit_seconds():
    bucket = TokenBucket(60, now=0.0)
    assert [bucket.take(1, now=0.0) for _ in range(60)] == [0.0] * 60
    assert bucket.take(1, now=0.0) == pytest.approx(1.0)  # refused: one token a second
    assert bucket.take(1, now=0.5) == pytest.approx(0.5)
    assert bucket.take(1, now=1.0) == 0.0
    assert bucket.take(1, now=1.0) == pytest.approx(1.0)


def test_a_bucket_never_holds_more_than_its_limit_and_a_clock_going_back_refills_nothing():
    bucket = TokenBucket(10, now=0.0)
    bucket.take(10, now=0.0)
    assert bucket.level_at(3600.0) == 10  # an hour idle: full, not 600
    assert bucket.level_at(-5.0) == 0.0
    assert bucket.wait(1, now=-5.0) == pytest.approx(6.0)


def test_a_cost_above_the_limit_waits_for_a_full_bucket_instead_of_never_passing():
    bucket = TokenBucket(1000, now=0.0)
    assert bucket.take(400, now=0.0) == 0.0
    assert bucket.wait(5000, now=0.0) == pytest.approx(400 * 60 / 1000)
    assert bucket.take(5000, now=24.0) == 0.0 and bucket.level == pytest.approx(0.0)


def test_adjust_may_leave_a_debt_that_refilling_pays_back_and_a_refund_never_overfills():
    bucket = TokenBucket(600, now=0.0)  # 10 tokens a second
    bucket.adjust(900, now=0.0)
    assert bucket.level == -300
    assert bucket.wait(1, now=0.0) == pytest.approx(30.1)
    bucket.adjust(-10_000, now=0.0)
    assert bucket.level == 600


def test_buckets_take_from_rpm_and_tpm_together_or_from_neither():
    buckets = Buckets(RateLimits(rpm=3, tpm=100), now=0.0)
    assert buckets.take(60, now=0.0) is None
    refused = buckets.take(60, now=0.0)  # tpm has 40 left: refused, and rpm keeps its 2
    assert refused == Limited("tpm 100", pytest.approx(12.0))
    assert buckets.rpm is not None and buckets.rpm.level == 2
    assert buckets.take(40, now=0.0) is None and buckets.take(0, now=0.0) is None
    assert buckets.take(0, now=0.0) == Limited("rpm 3", pytest.approx(20.0))  # rpm is out


def test_the_refusal_names_the_limit_that_frees_last_and_rounds_retry_after_up():
    buckets = Buckets(RateLimits(rpm=60, tpm=100), now=0.0)
    buckets.take(100, now=0.0)
    refused = buckets.peek(50, now=0.0)
    assert refused is not None and refused.what == "tpm 100" and refused.free_in_s == pytest.approx(30.0)
    assert refused.describe() == "at its rate limit (tpm 100), free in 30.0 s"
    assert Limited("rpm 60", 2.1).retry_after_s == 3
    assert Limited("rpm 60", 2.0).retry_after_s == 2
    assert Limited("rpm 60", 0.01).retry_after_s == 1


def test_settle_charges_tpm_the_real_usage_minus_what_admission_charged():
    buckets = Buckets(RateLimits(tpm=1000), now=0.0)
    buckets.take(300, now=0.0)  # estimate: input + max_tokens
    buckets.settle(300, 120, now=0.0)  # the answer was short: 180 back
    assert buckets.tpm is not None and buckets.tpm.level == pytest.approx(880)
    buckets.settle(0, 900, now=0.0)  # post-paid: a debt of 20
    assert buckets.tpm.level == pytest.approx(-20)
    assert buckets.peek(0, now=0.0) == Limited("tpm 1000", pytest.approx(1.2))
    assert request_cost(100, 256) == 356 and request_cost(100, None) == 100


def test_a_non_positive_limit_is_refused():
    with pytest.raises(ValueError):
        TokenBucket(0, now=0.0)


def _known(p50_s: float) -> LatencyModel:
    model = LatencyModel()
    for _ in range(10):
        model.observe(p50_s, first_s=p50_s / 2, output_tokens=50, now=1.0)
    return model


def test_a_backend_at_its_limit_is_passed_over_like_one_that_misses_the_deadline():
    tiers = (Tier("low", 0.5, ("small",)), Tier("high", None, ("fast", "other")))
    models = {"small": _known(0.1), "fast": _known(0.2), "other": _known(0.6)}
    free = plan_route(tiers, 1, RouteInputs(models=models, prices={}, deadline_s=5.0, prefer="fast"))
    assert free.names[0] == "fast"
    limited = {"fast": Limited("rpm 60", 2.1)}
    plan = plan_route(tiers, 1, RouteInputs(models=models, prices={}, deadline_s=5.0, prefer="fast", limited=limited))
    assert plan.names == ("other", "fast", "small")  # still tried, after the one that is free
    assert "fast is at its rate limit (rpm 60), free in 2.1 s" in plan.why
    assert plan.candidate("fast").as_dict()["rate_limit"] == "at its rate limit (rpm 60), free in 2.1 s"
    assert "rate_limit" not in plan.candidate("other").as_dict()


def test_with_every_backend_of_the_tier_at_its_limit_fail_does_not_refuse_and_downgrade_goes_weaker():
    tiers = (Tier("low", 0.5, ("small",)), Tier("high", None, ("fast",)))
    models = {"small": _known(0.1), "fast": _known(0.2)}
    limited = {"fast": Limited("rpm 60", 2.1)}
    fail = plan_route(tiers, 1, RouteInputs(models=models, prices={}, deadline_s=5.0, on_deadline_risk="fail",
                                            limited=limited))
    assert fail.refused is None and fail.names == ("fast",)  # ends as a rate-limit error, not a deadline refusal
    assert "is at its rate limit (soonest: fast, at its rate limit (rpm 60), free in 2.1 s)" in fail.why
    down = plan_route(tiers, 1, RouteInputs(models=models, prices={}, deadline_s=5.0, on_deadline_risk="downgrade",
                                            limited=limited))
    assert down.names[0] == "small" and down.downgrade is not None and "rate limit" in down.downgrade
