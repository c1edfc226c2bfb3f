"""Where the labels place a boundary (policies/complexity/training/placement.py), and adaptation
handed a boundary's threshold (adapt.py): a class the labels say belongs above the boundary is
moved across it, labels already placed right move nothing, and the version in use's own labels
are never placed worse."""

from __future__ import annotations

import math

import pytest

from policies.complexity import ComplexityScorer, Weights
from policies.complexity.training.adapt import adapt
from policies.complexity.training.placement import classes, cross_validated, misplaced, shift
from policies.complexity.training.terms import logit

pytestmark = pytest.mark.unit

CUT = logit(0.45)


def _labels(ups: int, stays: int):
    return classes([0.0] * ups + [1.0] * stays, [1.0] * (ups + stays))


def test_no_shift_when_the_labels_are_placed_right_already():
    c = _labels(2, 2)
    z = [CUT + 1.0, CUT + 0.2, CUT - 0.3, CUT - 2.0]
    assert misplaced(z, c, CUT, range(4)) == 0 and shift(z, c, CUT) == 0.0


def test_a_separated_class_under_the_boundary_moves_to_the_middle_of_the_gap():
    c = _labels(2, 2)
    z = [CUT - 0.2, CUT - 0.3, CUT - 1.0, CUT - 1.4]  # every "up" prompt under the threshold
    delta = shift(z, c, CUT)
    assert math.isclose(delta, (0.3 + 1.0) / 2)  # between the lowest up (edge 0.3) and highest stay (1.0)
    assert misplaced([v + delta for v in z], c, CUT, range(4)) == 0


def test_only_bad_verdicts_go_past_the_lowest_by_half_their_spread():
    c = _labels(3, 0)
    z = [CUT - 1.0, CUT - 2.0, CUT - 3.0]
    delta = shift(z, c, CUT)
    assert delta > 3.0 and misplaced([v + delta for v in z], c, CUT, range(3)) == 0


def test_among_equally_good_shifts_the_one_nearest_none():
    # up, stay, up, stay from high to low: one error at best, at two places; the nearer wins
    c = classes([0.0, 1.0, 0.0, 1.0], [1.0] * 4)
    z = [CUT - 0.1, CUT - 0.5, CUT - 3.0, CUT - 3.5]
    delta = shift(z, c, CUT)
    assert 0.1 <= delta < 0.5


def test_cross_validated_placement_gains_on_labels_each_shift_did_not_see():
    c = _labels(20, 20)
    z = [CUT - 0.2 - 0.01 * i for i in range(20)] + [CUT - 1.5 - 0.01 * i for i in range(20)]
    folds = [{f: [i for i in range(40) if i % 4 == f] for f in range(4)}]
    found = cross_validated([z], folds, z, c, CUT, list(range(40)))
    assert found.value == pytest.approx(0.5) and found.value > 3 * found.se  # the 20 ups, all moved
    same = cross_validated([z], folds, z, _labels(0, 40), CUT, list(range(40)))
    assert same.value == 0.0  # every label "stay", already below: nothing to gain


def _records(n_up: int, n_stay: int) -> list[dict]:
    ups = [{"id": f"u{i}", "prompt": f"Tom has {i + 3} apples and buys {2 * i + 5} more. How many apples now?",
            "local": 0.0, "hosted": 1.0} for i in range(n_up)]
    stays = [{"id": f"s{i}", "prompt": f"hi there friend number {i}, how are you?", "local": 1.0, "hosted": 1.0}
             for i in range(n_stay)]
    return ups + stays


def test_adapt_with_a_threshold_moves_a_class_across_it_and_without_one_keeps_the_hosted_share():
    base = Weights.load()
    records = _records(60, 90)
    scorer = ComplexityScorer(base)
    assert all(scorer.score_text(r["prompt"]) < 0.45 for r in records)  # as shipped, all stay below
    found = adapt(base, records, threshold=0.45)
    assert found.adopted and found.placement is not None and found.shift > 0, found.reason
    moved = ComplexityScorer(found.weights)
    up = [moved.score_text(r["prompt"]) >= 0.45 for r in records]
    assert all(up[:60]) and not any(up[60:])
    assert not adapt(base, records).adopted  # route calibrate: the order was right, nothing to gain


def test_adapt_with_a_threshold_keeps_labels_that_are_placed_right():
    base = Weights.load()
    records = _records(60, 90)
    scorer = ComplexityScorer(base)
    cut = 0.25  # a boundary the shipped weights already place both kinds on the right side of
    assert all((scorer.score_text(r["prompt"]) >= cut) == (r["local"] == 0.0) for r in records)
    found = adapt(base, records, threshold=cut)
    assert not found.adopted and found.weights is base and found.placement is not None
    assert found.placement.value == 0.0, found.reason
