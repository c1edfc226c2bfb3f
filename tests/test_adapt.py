"""Adapting the weights in use to a domain's labels (policies/complexity/training/adapt.py) and
the hashed domain vocabulary it adds to the scorer (policies/complexity/domain.py).

Labels: tests/data/learning_sample.jsonl, 480 MMLU questions of four subjects (RouteLLM), on
which the shipped weights route worse than random: the kind of new domain adaptation is for.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from policies.complexity import ComplexityScorer, Weights
from policies.complexity.domain import BUCKETS, domain_value, tokens
from policies.complexity.training.adapt import AdaptOptions, adapt, estimate
from policies.complexity.training.gate import ADOPT_Z, FoldGain, corrected_gain, fold_gain
from policies.complexity.training.leave_one_out import set_apgr
from policies.complexity.training.terms import Stats, prepare

pytestmark = pytest.mark.unit

SAMPLE = Path(__file__).parent / "data" / "learning_sample.jsonl"


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def _apgr(weights: Weights, records: list[dict[str, Any]]) -> float:
    scorer = ComplexityScorer(weights)
    return set_apgr([scorer.score_text(r["prompt"]) for r in records], records)


def _logits(weights: Weights, records: list[dict[str, Any]]) -> list[float]:
    scorer = ComplexityScorer(weights)
    return [math.log(p / (1 - p)) for p in (scorer.score_text(r["prompt"]) for r in records)]


@pytest.fixture(scope="module")
def adapted() -> tuple[Weights, Any, list[dict[str, Any]], list[dict[str, Any]]]:
    records = _records()
    shipped = Weights.load()
    return shipped, adapt(shipped, records[:300]), records[:300], records[300:]


def test_labels_of_a_new_domain_are_adopted_and_route_better_on_prompts_not_fitted_on(adapted) -> None:
    shipped, found, _, rest = adapted
    assert found.adopted, found.reason
    assert found.gain is not None and found.gain.value > found.gain.se
    assert found.before is not None and found.after is not None
    assert found.after.value - found.before.value == pytest.approx(found.gain.value, abs=1e-3)
    assert _apgr(found.weights, rest) >= _apgr(shipped, rest) + 0.3  # the shipped weights: below random here


def test_adapted_weights_keep_the_score_scale_and_the_hosted_share(adapted) -> None:
    shipped, found, labelled, _ = adapted
    old, new = _logits(shipped, labelled), _logits(found.weights, labelled)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    sd = lambda xs: math.sqrt(sum((x - mean(xs)) ** 2 for x in xs) / len(xs))  # noqa: E731
    assert mean(new) == pytest.approx(mean(old), abs=1e-3) and sd(new) == pytest.approx(sd(old), rel=1e-3)
    share = lambda w: sum(ComplexityScorer(w).score_text(r["prompt"]) >= w.threshold for r in labelled)  # noqa: E731
    assert abs(share(found.weights) - share(shipped)) <= 1


def test_adapted_weights_survive_their_file(adapted, tmp_path: Path) -> None:
    _, found, labelled, _ = adapted
    assert found.weights.domain and all(0 <= b < BUCKETS for b in found.weights.domain)
    path = tmp_path / "w.json"
    found.weights.save(path)
    again = ComplexityScorer.load(path)
    assert again.weights.domain == found.weights.domain
    for r in labelled[:50]:
        assert again.score_text(r["prompt"]) == pytest.approx(ComplexityScorer(found.weights).score_text(r["prompt"]))
    assert "hosted" not in path.read_text(encoding="utf-8").split('"domain"')[1]  # buckets, never the words


def test_the_domain_part_is_explained_and_adds_up(adapted) -> None:
    _, found, labelled, _ = adapted
    score = ComplexityScorer(found.weights).score([{"role": "user", "content": labelled[0]["prompt"]}])
    assert "domain" in score.contributions
    assert score.base + sum(score.contributions.values()) == pytest.approx(score.value, abs=1e-9)


def test_labels_that_say_nothing_about_the_prompt_are_not_adopted() -> None:
    # The same prompts with their labels dealt out at random: nothing to learn. (A one-off
    # calibration takes a gain beyond ADOPT_Z standard errors, so now and then such a deal
    # gets through; these deals do not, and must keep not doing so. Deal 5 got through the
    # gate before issue 36: t = 1.05 against an error bootstrapped with the folds' scores fixed.)
    records = _records()[:200]
    shipped = Weights.load()
    for seed in (0, 2, 5):
        labels = [(r["local"], r["hosted"]) for r in records]
        random.Random(seed).shuffle(labels)
        found = adapt(shipped, [{**r, "local": lo, "hosted": hi} for r, (lo, hi) in zip(records, labels)])
        assert not found.adopted and found.weights is shipped, (seed, found.reason)


def test_a_folds_gain_is_the_apgr_difference_on_its_labels() -> None:
    records = _records()[:150]
    gains = [r["hosted"] - r["local"] for r in records]
    gap = sum(gains) / len(gains)
    shipped = ComplexityScorer(Weights.load())
    before = [round(shipped.score_text(r["prompt"]), 2) for r in records]  # rounded: ties too
    after = [float(len(r["prompt"]) // 40) for r in records]
    found = fold_gain(gains, after, before, range(len(records)))
    assert found.area / gap == pytest.approx(set_apgr(after, records) - set_apgr(before, records), abs=1e-12)
    assert found.variance > 0 and found.labels == 150


def _moved_up(labels: int) -> tuple[float, float]:
    """(gain, error) of an order that differs from the incumbent's only by sending `labels`
    prompts that gain from the stronger tier to the top: folds x repeats as `adapt` draws them."""
    rng = random.Random(0)
    n = 300
    gains = [rng.choice([0.0] * 7 + [1.0, 1.0, -1.0]) for _ in range(n)]
    before = [rng.random() for _ in range(n)]
    after = list(before)
    for i in [i for i in range(n) if gains[i] > 0][:labels]:
        after[i] = 2.0
    runs = []
    for repeat in range(3):
        folds: dict[int, list[int]] = {}
        for i in range(n):
            folds.setdefault(random.Random(f"{repeat}:{i}").randrange(5), []).append(i)
        runs.append([fold_gain(gains, after, before, held) for held in folds.values()])
    found = corrected_gain(runs, sum(gains) / n, 5)
    return found.value, found.se


def test_a_gain_resting_on_a_few_labels_does_not_pass() -> None:
    # Before issue 36 the error was bootstrapped over the labels with the orders fixed: a gain
    # from 1, 2 or 3 prompts moved up came out 1.01, 1.20, 1.57 errors (passing its bar of 1).
    # An exact sign test says 3 of 3 in favour happens one time in eight by luck.
    t = [value / se for value, se in map(_moved_up, (1, 2, 3, 5, 8, 20))]
    assert t == sorted(t), t  # the more labels differ, the surer: the error never shrinks faster than the gain
    assert max(t[:3]) < ADOPT_Z < t[3], t


def test_the_error_is_no_smaller_than_each_folds_own_labels_give() -> None:
    same = [[FoldGain(0.01, 0.0004, 40) for _ in range(5)] for _ in range(3)]
    found = corrected_gain(same, 0.5, 5)  # the folds agree exactly: their spread says nothing
    assert found.value == pytest.approx(0.02)
    assert found.se == pytest.approx(math.sqrt((1 / 15 + 1 / 4) * 0.0004) / 0.5)
    spread = [[FoldGain(a, 0.0001, 40) for a in (0.0, 0.04, -0.02, 0.06, 0.02)] for _ in range(3)]
    wide = corrected_gain(spread, 0.5, 5)  # folds that disagree more than their labels explain
    areas = [a for run in spread for a in (f.area for f in run)]
    mean = sum(areas) / 15
    assert wide.se == pytest.approx(math.sqrt((1 / 15 + 1 / 4) * sum((a - mean) ** 2 for a in areas) / 14) / 0.5)


def test_few_labels_move_nothing() -> None:
    shipped = Weights.load()
    records = _records()
    found = adapt(shipped, records[:20])
    assert not found.adopted and found.weights is shipped and "needs 30" in found.reason
    few_differ = [r for r in records if r["local"] == r["hosted"]][:60] + [r for r in records if r["local"] != r["hosted"]][:10]
    found = adapt(shipped, few_differ)
    assert not found.adopted and "10 of the labels show the tiers' answers differ" in found.reason


def test_no_gain_from_the_stronger_tier_is_no_reason_to_move() -> None:
    records = [{**r, "local": 1.0, "hosted": 0.0 if i % 3 else 1.0} for i, r in enumerate(_records()[:100])]
    found = adapt(Weights.load(), records)
    assert not found.adopted and "no gain" in found.reason


def test_an_incumbent_is_judged_only_on_labels_it_was_not_fitted_on(adapted) -> None:
    shipped, found, labelled, rest = adapted
    more = labelled + rest[:100]
    again = adapt(shipped, more, incumbent=found.weights, seen={r["id"] for r in labelled})
    assert again.judged_on == 100 and again.labels == 400
    assert not again.adopted or again.gain.value > again.gain.se  # type: ignore[union-attr]


def test_the_same_labels_give_the_same_weights() -> None:
    records, quick = _records()[:150], AdaptOptions(repeats=1, bootstrap=50)
    one, two = adapt(Weights.load(), records, options=quick), adapt(Weights.load(), list(records), options=quick)
    assert one.candidate == two.candidate and one.gain == two.gain


def test_estimate_has_an_error_that_shrinks_with_more_labels() -> None:
    shipped, records = Weights.load(), _records()
    small, large = estimate(shipped, records[:100]), estimate(shipped, records)
    assert small is not None and large is not None and 0 < large.se < small.se
    assert large.value == pytest.approx(_apgr(shipped, records), abs=1e-9)


def test_fold_sums_add_up_to_the_whole() -> None:
    records = _records()[:120]
    d = prepare(Weights.load(), records)
    whole, part, rest = Stats.of(d, range(120)), Stats.of(d, range(40)), Stats.of(d, range(40, 120))
    left = whole.without([part])
    assert left.n == rest.n and left.gs == pytest.approx(rest.gs) and set(left.buckets) == set(rest.buckets)
    assert all(left.buckets[b] == pytest.approx(rest.buckets[b]) for b in rest.buckets)
    assert left.xx[0][5] == pytest.approx(rest.xx[0][5])


def test_domain_buckets_are_fixed_by_the_words_alone() -> None:
    found = tokens(["the", "b", "quantum", "field"])
    assert found == tokens(["the", "b", "quantum", "field"])
    assert len(found) == 6  # three words of two letters or more, three pairs
    assert tokens(["quantum"]) < found and tokens([]) == frozenset()
    table = {b: 1.0 for b in tokens(["quantum"])}
    assert domain_value(found, table.get) == pytest.approx(1 / 6)
    assert domain_value(frozenset(), table.get) == 0.0


def test_weights_without_a_domain_write_the_file_as_before() -> None:
    assert "domain" not in Weights.load().to_json()


def test_too_strict_a_bar_keeps_even_a_real_gain(adapted) -> None:
    shipped, found, labelled, _ = adapted
    strict = adapt(shipped, labelled, options=AdaptOptions(z=1e6))
    assert strict.gain == found.gain and strict.candidate == found.candidate
    assert not strict.adopted and strict.weights is shipped and "standard error" in strict.reason


# -- `route calibrate` -------------------------------------------------------------------


def _cli():
    from router.cli.app import app

    return app


def test_calibrate_on_a_hundred_labels_keeps_the_weights_in_use(tmp_path: Path) -> None:
    # Before: `route calibrate` fitted from scratch on any labels and always wrote the file; on
    # the first 100 records of the committed sample, weights that route the other 200 worse
    # than the shipped ones (0.604 against 0.632). Now a gain within its error writes nothing.
    from typer.testing import CliRunner

    sample = Path(__file__).parent / "data" / "routing_sample.jsonl"
    data = tmp_path / "first100.jsonl"
    data.write_text("".join(sample.read_text(encoding="utf-8").splitlines(keepends=True)[:100]), encoding="utf-8")
    out = tmp_path / "w.json"
    result = CliRunner().invoke(_cli(), ["calibrate", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "kept the weights in use" in result.output and not out.exists()


def test_calibrate_reports_cross_validated_apgr_with_its_error_and_writes_what_wins(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()[:300]), encoding="utf-8")
    out = tmp_path / "w.json"
    result = CliRunner().invoke(_cli(), ["calibrate", str(data), "--out", str(out), "--hosted-share", "0.25", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["installed"] and summary["out"] == str(out) and summary["labels"] == 300
    for key in ("apgr_before", "apgr_after", "gain"):
        assert set(summary[key]) == {"value", "se"} and summary[key]["se"] > 0
    assert summary["gain"]["value"] > summary["gain"]["se"]
    scorer = ComplexityScorer.load(out)
    assert scorer.threshold == pytest.approx(summary["threshold"])
    share = sum(scorer.score_text(r["prompt"]) >= scorer.threshold for r in _records()[:300]) / 300
    assert share == pytest.approx(0.25, abs=0.01)
    text = CliRunner().invoke(_cli(), ["calibrate", str(data), "--out", str(tmp_path / "x.json")])
    assert "apgr before: 0.5" in text.output and "±" in text.output


def test_calibrate_refuses_qualities_outside_zero_to_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"id": "1", "prompt": "p", "local": 3, "hosted": 1}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(_cli(), ["calibrate", str(data), "--out", str(tmp_path / "w.json")])
    assert result.exit_code == 2 and "local must be a quality between 0 and 1" in result.output
