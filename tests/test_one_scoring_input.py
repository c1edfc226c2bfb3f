"""One scoring input everywhere (issue 46): a plain call and a session's call of the same
conversation score the same words and land on the same tier; `route score` and `route eval`
judge with the routing model `route serve` decides with, the learned version in use included.

Before: a plain call scored the task with up to 64 earlier turns (the scorer's history
features add to the score), a session scored one turn, so a second turn's tier depended on
whether a session id was sent; `route score` loaded the shipped scorer whatever the server had
adopted since."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from typer.testing import CliRunner

from benchmarks.harness import CORPUS, DIALECTS
from policies.complexity import DEFAULT_WEIGHTS, ComplexityScorer, Weights
from router import Router
from router.cli.app import app
from router.config_loader import load_config
from router.learning import open_store
from router.server import RouteServer

pytestmark = pytest.mark.integration

HARD = ("Prove that for every prime p > 3, p^2 - 1 is divisible by 24, and explain the group-theoretic reason "
        "behind the pattern, relating it to the structure of (Z/24Z)*.")
ANSWER = "Here is a proof, step by step. " * 40


def _config(sim: Any, tmp_path: Path, learn: bool = False) -> dict[str, Any]:
    backends = {n: {"kind": "openai", "model": f"m-{n}", "base_url": sim.base_url, "max_retries": 0}
                for n in ("local", "fast", "frontier")}
    routing: dict[str, Any] = {"scorer": {"kind": "learned"},
                               "tiers": [{"name": "local", "below": 0.3, "backends": ["local"]},
                                         {"name": "fast", "below": 0.45, "backends": ["fast"]},
                                         {"name": "frontier", "backends": ["frontier"]}]}
    if learn:
        routing["learn"] = {"refresh_ms": 3_600_000}
    return {"backends": backends, "routing": routing, "log": {"path": str(tmp_path / "route.db")}}


def _corpus(name: str) -> list[dict[str, Any]]:
    record = json.loads((CORPUS / f"{name}.json").read_text())
    return DIALECTS[record["path"]].parse(orjson.dumps(record["body"])).messages


CONVERSATIONS = {
    "a follow-up after a long answer": [{"role": "user", "content": HARD}, {"role": "assistant", "content": ANSWER},
                                        {"role": "user", "content": "Now do the same for p^4 - 1 and 240."}],
    "claude-code-second-turn": "claude-code-second-turn",
    "qwen-code-chat-second-turn": "qwen-code-chat-second-turn",
    "codex-responses-second-turn": "codex-responses-second-turn",
}


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_the_same_conversation_scores_the_same_with_a_session_id_and_without(sim, tmp_path, name):
    given = CONVERSATIONS[name]
    messages = _corpus(given) if isinstance(given, str) else given
    with Router(load_config(_config(sim, tmp_path))) as router:
        plain = router.explain(messages)
        in_session = router.explain(messages, session=f"s-{name}")
    assert in_session.session is not None  # the session path decided it
    assert plain.score is not None and in_session.score is not None
    assert in_session.score.value == pytest.approx(plain.score.value, abs=1e-12)
    assert in_session.tier == plain.tier


def test_a_plain_call_scores_the_user_words_not_the_length_of_the_conversation(sim, tmp_path):
    """The scorer's history features are what made a plain call differ: the same follow-up
    after a long conversation scores as it does after a short one."""
    follow_up = {"role": "user", "content": "Now do the same for p^4 - 1 and 240."}
    short = [{"role": "user", "content": HARD}, {"role": "assistant", "content": "ok"}, follow_up]
    long = [{"role": "user", "content": HARD}, *[{"role": "assistant", "content": ANSWER},
                                                 {"role": "user", "content": HARD}] * 20,
            {"role": "assistant", "content": ANSWER}, follow_up]
    with Router(load_config(_config(sim, tmp_path))) as router:
        a, b = router.explain(short), router.explain(long)
    assert a.score is not None and b.score is not None and a.score.value == b.score.value


def _adopt(config: Any, bias: float, sign: float = 1.0) -> int:
    """A version whose scorer moves every prompt up by `bias` on the logit (`sign` -1: reads every
    feature backwards), made current."""
    base = Weights.load()
    learned = dataclasses.replace(base, bias=base.bias + bias, weights={k: sign * w for k, w in base.weights.items()},
                                  vocabulary={k: sign * w for k, w in base.vocabulary.items()})
    store = open_store(config)
    try:
        version = store.adopt(0, 0, learned.to_json(), seen=0, heads={}, summary={})
    finally:
        store.close()
    assert version is not None
    return version


def test_route_score_after_an_adopted_version_agrees_with_the_server(sim, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config(sim, tmp_path, learn=True)))
    prompts = ["hi there", "Write a haiku about rain.", HARD]
    shipped = ComplexityScorer.load()
    version = _adopt(load_config(str(path)).config, bias=1.5)
    lines = "".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(prompts))
    scored = CliRunner().invoke(app, ["score", "-c", str(path)], input=lines)
    assert scored.exit_code == 0, scored.output
    cli = [json.loads(line)["score"] for line in scored.stdout.splitlines()]
    with Router(load_config(str(path))) as router, RouteServer(router) as srv:
        assert router.model.version == version
        served = []
        for prompt in prompts:
            answer = httpx.post(f"{srv.base_url}/chat/completions", timeout=30,
                                json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
            assert answer.status_code == 200 and answer.headers["x-route-version"] == str(version)
            served.append(float(answer.headers["x-route-score"]))
    assert cli == pytest.approx(served, abs=1e-3)  # the header's rounding
    explained = CliRunner().invoke(app, ["--explain", "--json", "-c", str(path), prompts[1]])
    assert explained.exit_code == 0, explained.output
    assert json.loads(explained.stdout)["version"] == version
    assert json.loads(explained.stdout)["score"] == pytest.approx(cli[1], abs=1e-6)
    assert all(c - shipped.score_text(p) > 0.05 for c, p in zip(cli, prompts))  # not the shipped scorer
    # --weights still judges a file, whatever the config adopted
    fixed = CliRunner().invoke(app, ["score", "-c", str(path), "--weights", str(DEFAULT_WEIGHTS)], input=lines)
    assert [json.loads(line)["score"] for line in fixed.stdout.splitlines()] == \
        [round(shipped.score_text(p), 6) for p in prompts]


def test_route_eval_judges_the_adopted_version(sim, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config(sim, tmp_path, learn=True)))
    prompts = ["hi", "2+2?", "thanks!", HARD, "Prove Fermat's little theorem from Lagrange's theorem, in full.",
               "Derive the closed form of the Fibonacci numbers and prove it by induction."]
    data = tmp_path / "set.jsonl"  # the hard prompts need the hosted model
    data.write_text("".join(json.dumps({"id": i, "prompt": p, "local": float(i < 3), "hosted": 1.0}) + "\n"
                            for i, p in enumerate(prompts)))

    def apgr() -> float:
        result = CliRunner().invoke(app, ["eval", str(data), "-c", str(path), "--json"])
        assert result.exit_code == 0, result.output
        return float(json.loads(result.stdout)["reports"][0]["apgr"])

    before = apgr()
    _adopt(load_config(str(path)).config, bias=0.0, sign=-1.0)  # ranks the easy prompts above the hard
    assert before > 0.5 > apgr()


def test_without_a_config_file_route_score_needs_no_config_because_the_default_learns_nothing():
    """`route score` skips loading the embedded default config (pydantic, the schema) when no
    config file is found; that holds only while the default scores with the shipped weights and
    does not learn. This says so, and fails the day the default changes."""
    from router.config_loader import (
        _embedded_text,  # the default as shipped
        parse_config,
    )
    from router.wiring import build_model

    loaded = parse_config(_embedded_text(), "<embedded>")
    assert loaded.config.routing.learn is None
    scorer, shipped = build_model(loaded).scorer, ComplexityScorer.load()
    for prompt in ("hi", HARD, "Write a haiku about rain."):
        assert scorer.score([{"role": "user", "content": prompt}]).value == shipped.score_text(prompt)


@pytest.mark.parametrize(("scorer", "shipped"), [(None, True), ({"kind": "learned"}, True), ({"kind": "length"}, False)])
def test_route_score_reads_the_configs_scorer_and_skips_the_schema_only_for_the_shipped_one(sim, tmp_path, scorer,
                                                                                               shipped):
    config = _config(sim, tmp_path)
    if scorer is None:
        del config["routing"]["scorer"]
    else:
        config["routing"]["scorer"] = scorer
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    lines = "".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(["hi", HARD]))
    scored = CliRunner().invoke(app, ["score", "-c", str(path)], input=lines)
    assert scored.exit_code == 0, scored.output
    cli = [json.loads(line)["score"] for line in scored.stdout.splitlines()]
    with Router(load_config(str(path))) as router:
        assert cli == pytest.approx([router.explain(p).score.value for p in ("hi", HARD)], abs=1e-6)  # type: ignore[union-attr]
    assert (cli == [round(ComplexityScorer.load().score_text(p), 6) for p in ("hi", HARD)]) is shipped
