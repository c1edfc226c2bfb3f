"""benchmarks/routing_ceiling.py: the in-domain ceiling finds signal that is there, and none
that is not (it needs the `bench` extra's scikit-learn)."""

from __future__ import annotations

import random
from typing import Any

import pytest

pytest.importorskip("sklearn")

from benchmarks.routing_ceiling import TARGET_MARGIN, ceiling, format_table, set_apgr

pytestmark = pytest.mark.integration

FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()


def _records(n: int, seed: int, signal: bool) -> list[dict[str, Any]]:
    """Prompts of random length; with `signal`, those naming a "lemma" need the hosted model
    (it alone answers them) and the rest are answered by both; without it, a coin decides."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        hard = rng.random() < 0.3
        words = [rng.choice(FILLER) for _ in range(rng.randint(5, 60))]
        if hard:
            words.insert(rng.randrange(len(words)), "lemma")
        needs_hosted = hard if signal else rng.random() < 0.3
        records.append(
            {"id": f"s-{i}", "prompt": " ".join(words), "local": 0.0 if needs_hosted else 1.0, "hosted": 1.0}
        )
    return records


def test_a_word_that_decides_the_gain_is_found_in_domain_and_length_is_not() -> None:
    records = _records(300, seed=1, signal=True)
    row = ceiling("synthetic", records)
    oracle = set_apgr([r["hosted"] - r["local"] for r in records], records)  # under 1: a third gains
    assert row.families["words30"] > oracle - 0.05  # the word is the whole signal, and the words family sees it
    assert 0.4 < row.length < 0.6  # length was drawn independently of the label
    assert row.short_of_target < 0  # the best fit clears length + TARGET_MARGIN
    assert "synthetic" in format_table([row])


def test_labels_unrelated_to_the_prompt_leave_every_family_near_random() -> None:
    row = ceiling("noise", _records(300, seed=2, signal=False))
    assert all(0.35 < value < 0.65 for value in row.families.values()), row.families
    assert row.best < row.length + TARGET_MARGIN + 0.15
