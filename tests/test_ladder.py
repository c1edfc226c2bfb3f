"""More than two tiers: each boundary decided by its own head and threshold (policies/ladder.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from backends.base import BackendSettings
from backends.errors import ConfigError
from backends.fake import FakeBackend
from policies.complexity import ComplexityScorer
from policies.complexity.model import MODEL_FEATURES, Weights
from policies.ladder import Ladder, Tier, pick_tier
from policies.length import LengthScorer
from router import Router

pytestmark = pytest.mark.unit

TIERS = (Tier("local", 0.3, ("l",)), Tier("fast", 0.6, ("f",)), Tier("frontier", None, ("x",)))
PROOF = "Prove rigorously that the derivation is valid and justify why each step holds."
CHATTY = "Tell me about your favourite places to visit in spring, " * 12  # long, asks nothing hard


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _reasoning_head(path: Path, threshold: float = 0.5) -> Path:
    """A learned head that reads only reasoning words: a stand-in for one fitted on frontier-vs-fast
    outcomes, where length says little and what is asked says much."""
    weights = {f: 0.0 for f in MODEL_FEATURES} | {"lex_reasoning": 3.0}
    Weights(bias=-2.0, weights=weights, means={f: 0.0 for f in MODEL_FEATURES}, threshold=threshold).save(path)
    return path


def test_without_heads_the_ladder_is_the_band_set() -> None:
    ladder = Ladder(TIERS, (None, None))
    length = LengthScorer(threshold_chars=100)
    for chars in (0, 1, 20, 42, 43, 100, 149, 150, 151, 1000):
        messages = user("x" * chars)
        score = length.score(messages)
        index, crossings = ladder.climb(messages, score)
        assert index == pick_tier(score.value, TIERS), chars
        assert crossings[-1].up == (index == 2) and len(crossings) == min(index + 1, 2)
        assert all(c.head == "routing" for c in crossings)


def test_each_boundary_reads_its_own_head(tmp_path: Path) -> None:
    head = ComplexityScorer.load(_reasoning_head(tmp_path / "frontier.json"))
    ladder = Ladder(TIERS, (None, ("reasoning head", head)))
    length = LengthScorer(threshold_chars=100)

    def land(text: str) -> tuple[str, tuple]:
        index, crossings = ladder.climb(user(text), length.score(user(text)))
        return TIERS[index].name, crossings

    # a long chatty prompt crosses the length boundary but not the reasoning one
    tier, crossings = land(CHATTY)
    assert tier == "fast" and [c.up for c in crossings] == [True, False]
    assert crossings[-1].head == "reasoning head" and crossings[-1].threshold == 0.6
    # the same band set on the one score would have sent it to the frontier
    assert pick_tier(length.score(user(CHATTY)).value, TIERS) == 2
    tier, crossings = land(PROOF)
    assert tier == "frontier" and all(c.up for c in crossings)
    # a short prompt stays local and the head above is never run
    tier, crossings = land("hi")
    assert tier == "local" and len(crossings) == 1 and crossings[0].head == "routing"


def test_reason_names_the_deciding_boundary(tmp_path: Path) -> None:
    head = ComplexityScorer.load(_reasoning_head(tmp_path / "frontier.json"))
    ladder = Ladder(TIERS, (None, ("reasoning head", head)))
    score = LengthScorer(threshold_chars=100).score(user(CHATTY))
    _, crossings = ladder.climb(user(CHATTY), score)
    reason = ladder.reason(crossings, score)
    assert reason.startswith("decided by fast|frontier (reasoning head): ") and "< 0.600" in reason
    assert "after local|fast: " in reason and ">= 0.300" in reason


def test_heads_must_match_the_boundaries() -> None:
    with pytest.raises(ValueError, match="3 tiers have 2 boundaries"):
        Ladder(TIERS, (None,))


# ------------------------------------------------------------------ through the Router


def _config(head: Path | None, fast_below: object = 0.5) -> dict:
    fast: dict = {"name": "fast", "below": fast_below, "backends": ["fast"]}
    if head is not None:
        fast["scorer"] = {"kind": "learned", "weights": str(head)}
    return {
        "backends": {name: {"kind": "fake", "model": f"{name}-model"} for name in ("local", "fast", "frontier")},
        "routing": {
            "scorer": {"kind": "length", "threshold_chars": 100},
            "tiers": [{"name": "local", "below": 0.3, "backends": ["local"]}, fast,
                      {"name": "frontier", "backends": ["frontier"]}],
        },
    }  # fmt: skip


def _router(config: dict) -> Router:
    fakes = {n: FakeBackend(BackendSettings(name=n, model=f"{n}-model", max_retries=0)) for n in ("local", "fast", "frontier")}
    return Router.from_config(config, backends=fakes)


def test_router_uses_the_heads_calibrated_threshold_and_explains(tmp_path: Path) -> None:
    router = _router(_config(_reasoning_head(tmp_path / "frontier.json", threshold=0.55), "calibrated"))
    assert router.tiers[1].below == 0.55  # the head's own threshold, not the routing scorer's
    chatty, proof, short = router.explain(CHATTY), router.explain(PROOF), router.explain("hi")
    assert (chatty.tier, proof.tier, short.tier) == ("fast", "frontier", "local")
    assert chatty.reason.startswith("decided by fast|frontier (learned head)")
    boundaries = chatty.as_dict()["boundaries"]
    assert [b["boundary"] for b in boundaries] == ["local|fast", "fast|frontier"]
    assert [b["up"] for b in boundaries] == [True, False] and boundaries[1]["threshold"] == 0.55
    assert len(short.crossings) == 1


async def test_requests_reach_the_tier_their_boundary_chose(tmp_path: Path) -> None:
    router = _router(_config(_reasoning_head(tmp_path / "frontier.json")))
    assert (await router.acomplete(CHATTY)).backend == "fast"
    assert (await router.acomplete(PROOF)).backend == "frontier"


def test_one_scorer_keeps_the_familiar_reason() -> None:
    router = _router(_config(None))
    decision = router.explain("x" * 400)
    assert decision.tier == "frontier" and decision.reason.startswith("score 0.800 is above every other band")
    assert [c.head for c in decision.crossings] == ["routing", "routing"]


# ------------------------------------------------------------------ config errors


def _write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_a_scorer_on_the_last_tier_is_a_config_error_with_its_line(tmp_path: Path) -> None:
    config = _config(None)
    config["routing"]["tiers"][2]["scorer"] = {"kind": "length"}
    with pytest.raises(ConfigError, match="no boundary above it") as err:
        Router.from_config(str(_write(tmp_path, config)))
    assert err.value.line is not None


def test_a_bad_head_names_its_tier(tmp_path: Path) -> None:
    config = _config(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match=r"routing\.tiers\.1\.scorer is invalid") as err:
        Router.from_config(str(_write(tmp_path, config)))
    assert err.value.line is not None


def test_head_thresholds_need_not_ascend_with_the_bands(tmp_path: Path) -> None:
    # the head has its own scale: 0.2 after 0.3 is fine there, not on the one routing score
    router = _router(_config(_reasoning_head(tmp_path / "h.json"), 0.2))
    assert router.tiers[1].below == 0.2
    with pytest.raises(ConfigError, match="must ascend"):
        Router.from_config(str(_write(tmp_path, _config(None, 0.2))))


@pytest.mark.integration
def test_cli_explain_lists_each_boundary(tmp_path: Path) -> None:
    import subprocess

    config = _config(_reasoning_head(tmp_path / "frontier.json"))
    for backend in config["backends"].values():  # the CLI builds real backends; explain calls none
        backend.update(kind="openai", base_url="http://127.0.0.1:9/v1")
    path = _write(tmp_path, config)
    out = subprocess.run([sys.executable, "-m", "router.cli", "-c", str(path), "--explain", CHATTY],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "boundary local|fast" in out.stdout and "-> up" in out.stdout
    assert "boundary fast|frontier" in out.stdout and "-> stay" in out.stdout
    doc = json.loads(subprocess.run([sys.executable, "-m", "router.cli", "-c", str(path), "--explain", "--json", CHATTY],
                                    capture_output=True, text=True, timeout=60).stdout)  # fmt: skip
    assert doc["tier"] == "fast" and doc["boundaries"][1]["head"] == "learned head"
