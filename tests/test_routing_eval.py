"""Routing metrics on hand-checkable records."""

from __future__ import annotations

import pytest

from policies.routing_eval import (
    apgr,
    baseline_reports,
    cpt,
    evaluate,
    pgr,
    quality_at,
    quality_curve,
)

pytestmark = pytest.mark.unit

# four prompts: only the first two gain from the hosted model
LOCAL = [0.0, 0.0, 1.0, 1.0]
HOSTED = [1.0, 1.0, 1.0, 1.0]


def test_perfect_order_recovers_the_gap_early() -> None:
    curve = quality_curve([4, 3, 2, 1], LOCAL, HOSTED)
    assert curve == [(0.0, 0.5), (0.25, 0.75), (0.5, 1.0), (0.75, 1.0), (1.0, 1.0)]
    assert cpt(curve, 0.5) == pytest.approx(0.25)
    assert cpt(curve, 0.8) == pytest.approx(0.4)
    assert pgr(curve, 0.5) == pytest.approx(1.0)
    # area = 0.0625*... : trapezoids 0.15625 + 0.21875 + 0.25 + 0.25 = 0.875
    assert apgr(curve) == pytest.approx((0.875 - 0.5) / 0.5)


def test_ties_route_in_expected_random_order() -> None:
    curve = quality_curve([0, 0, 0, 0], LOCAL, HOSTED)
    assert curve == [(0.0, 0.5), (1.0, 1.0)]
    assert apgr(curve) == pytest.approx(0.5)
    assert cpt(curve, 0.8) == pytest.approx(0.8)
    assert quality_at(curve, 0.5) == pytest.approx(0.75)


def test_reverse_order_is_worse_than_random() -> None:
    assert apgr(quality_curve([1, 2, 3, 4], LOCAL, HOSTED)) < 0.5


def test_no_gap_gives_no_curve_metrics() -> None:
    report = evaluate("x", [1, 2], [1.0, 1.0], [1.0, 0.0])
    assert report.apgr is None and report.cpt50 is None and report.pgr50 is None


def test_oracle_can_beat_always_hosted() -> None:
    local, hosted = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]
    reports = {r.policy: r for r in baseline_reports(["a", "bb", "ccc", "dddd"], local, hosted)}
    assert reports["oracle"].apgr > 1.0
    assert reports["random"].apgr == pytest.approx(0.5)
    assert reports["always-local"].hosted_share == 0.0
    assert reports["always-hosted"].quality50 == pytest.approx(0.5)
    assert reports["length"].apgr is not None


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError):
        quality_curve([1.0], [0.0, 1.0], [1.0, 1.0])
