"""The learning package (router/learning/): the label store (SQLite and Redis), labels from
judge votes and feedback, which pair of tiers a request teaches about, the shadow judge, the
budget, versions installed boundary by boundary (three tiers), `routing.learn` config errors,
and `route learn status | history | rollback | resume`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from backends.errors import ConfigError
from backends.fake import FakeBackend
from backends.types import Completion, Timings, Usage
from policies.complexity import ComplexityScorer, Weights
from policies.complexity.training.gate import ADOPT_Z
from router.cli.app import app
from router.config_loader import load_config
from router.consortium.simulated import arbiter_responder
from router.core import Router
from router.decision import Outcome, RouteResult
from router.learning import learn_status, open_store
from router.learning.fleet import RedisLearningStore
from router.learning.labels import import_feedback, verdict_label
from router.learning.learner import online_z
from router.learning.shadow import Pair, ShadowJudge, pair_of
from router.learning.status import history, resume, rollback
from router.learning.store import LearningStore
from router.store import RequestRecord, Store

pytestmark = pytest.mark.unit

runner = CliRunner()


def _backend(model: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "openai", "model": model, "base_url": "http://127.0.0.1:9/v1", "max_retries": 0, **extra}


def _config(tmp_path: Path, tiers: int = 2, **learn: Any) -> dict[str, Any]:
    names = ["low", "mid", "top"][:tiers] if tiers == 3 else ["low", "top"]
    return {
        "backends": {name: _backend(f"m-{name}", price={"input": 1.0, "output": 1.0}) for name in names}
        | {"judge": _backend("m-judge", decoding="diffusion")},
        "routing": {"tiers": [{"name": n, "below": "calibrated" if i == 0 else 0.7, "backends": [n]}
                              for i, n in enumerate(names[:-1])] + [{"name": names[-1], "backends": [names[-1]]}],
                    "learn": {"shadow_rate": 1.0, "judge": "judge", **learn}},
        "log": {"enabled": False, "path": str(tmp_path / "route.db")},
    }  # fmt: skip


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "route.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


# -- the stores: one contract, SQLite and Redis ------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        found = LearningStore(tmp_path / "route.db")
    else:
        from redis import Redis

        server = request.getfixturevalue("redis_server")
        found = RedisLearningStore(Redis.from_url(server.url), "t:")
    yield found
    found.close()


@pytest.mark.integration
def test_a_store_keeps_each_label_once_by_its_ref(store) -> None:
    assert store.add_labels([(0, "shadow", "s1", "p1", 0.0, 1.0), (0, "feedback", "f1", "p2", 1.0, 1.0)]) == 2
    assert store.add_labels([(0, "shadow", "s1", "p1", 0.0, 1.0), (1, "shadow", "s2", "p3", 0.5, 0.5)]) == 1
    assert [(r.ref, r.prompt, r.local, r.hosted) for r in store.labels(0)] == [("s1", "p1", 0.0, 1.0), ("f1", "p2", 1.0, 1.0)]
    assert store.label_counts() == {0: {"shadow": 1, "feedback": 1}, 1: {"shadow": 1}}
    ids = [r.id for r in store.labels(0)] + [r.id for r in store.labels(1)]
    assert ids == sorted(ids) and len(set(ids)) == 3


@pytest.mark.integration
def test_a_store_counts_spend_per_utc_day(store) -> None:
    store.add_spend(0.25, 3, ts=86400 * 10 + 5)  # 1970-01-11
    store.add_spend(0.5, 3)
    store.add_spend(0.25, 2)
    assert store.spend() == (pytest.approx(0.75), 5)
    assert store.spend("1970-01-11") == (pytest.approx(0.25), 3)
    assert store.spend("*") == (pytest.approx(1.0), 8)


@pytest.mark.integration
def test_a_version_is_adopted_only_over_the_one_expected_and_not_while_pinned(store) -> None:
    assert store.current() == (0, False)
    first = store.adopt(0, 0, {"w": 1}, seen=5, heads={}, summary={"labels": 5})
    assert first is not None and store.current() == (first, False)
    assert store.adopt(0, 0, {"w": 2}, seen=6, heads={}, summary={}) is None  # another process got there first
    second = store.adopt(first, 1, {"w": 3}, seen=7, heads={0: first}, summary={})
    assert second is not None and store.version(second).heads == {0: first, 1: second}  # type: ignore[union-attr]
    store.set_current(first, pinned=True)
    assert store.adopt(first, 0, {"w": 4}, seen=8, heads={}, summary={}) is None
    assert [v.id for v in store.versions()] == [first, second]
    assert store.version(first).weights == {"w": 1} and store.version(first).seen == 5  # type: ignore[union-attr]


@pytest.mark.integration
def test_a_refit_is_claimed_once_per_batch_of_labels(store) -> None:
    assert store.claim_refit(0, 49, 50) == 0
    assert store.claim_refit(0, 50, 50) == 1
    assert store.claim_refit(0, 50, 50) == 0  # claimed already (by this process or another)
    assert store.claim_refit(0, 120, 50) == 2
    store.adopt(0, 0, {}, seen=1, heads={}, summary={})
    assert store.claim_refit(0, 170, 50) == 1  # counted again from the adoption
    assert store.claim_refit(1, 50, 50) == 1


def test_the_online_bar_rises_slowly_with_each_refit() -> None:
    bars = [online_z(m) for m in (1, 2, 5, 20, 100)]
    assert bars == sorted(bars) and bars[0] == ADOPT_Z and 2.4 < bars[3] < 2.5 and bars[-1] < 3.1


# -- labels ---------------------------------------------------------------------------


def test_both_orders_cancel_a_judge_that_prefers_what_it_reads_first() -> None:
    assert verdict_label([1, 1]) == (1.0, 0.0)  # the lower tier's answer was better both ways
    assert verdict_label([-1, -1]) == (0.0, 1.0)
    assert verdict_label([1, -1]) == (0.5, 0.5)  # each order preferred its first answer: a tie
    assert verdict_label([0, -1]) == (0.25, 0.75)
    assert verdict_label([None, -1]) == (0.0, 1.0)
    assert verdict_label([None, None]) is None


def test_feedback_of_three_tiers_labels_each_boundary_with_its_own_pair(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, tiers=3) | {"log": {"path": str(tmp_path / "route.db")}}).config
    log = feedback = Store(tmp_path / "route.db")
    log.log([RequestRecord(source="api", status="ok", backend=b, prompt=f"asked {b}") for b in ("low", "mid", "top")])
    for row in log.recent(3):
        feedback.add_verdict(row["id"], "bad")
    store = open_store(config)
    assert import_feedback(store, config) == 2
    assert import_feedback(store, config) == 0  # each once
    # a verdict on a boundary's lower tier: a bad answer there needed the upper one. Verdicts on
    # the upper tier's answers are left out (routing decided who answered: only the bad ones
    # would count, and they would say that what was sent up gained nothing).
    assert [(r.prompt, r.local, r.hosted) for r in store.labels(0)] == [("asked low", 0.0, 1.0)]
    assert [(r.prompt, r.local, r.hosted) for r in store.labels(1)] == [("asked mid", 0.0, 1.0)]


# -- which pair a request teaches about ------------------------------------------------


def _outcome(router: Router, prompt: str, backend: str, *, forced: bool = False, tool_calls: tuple = ()) -> Outcome:
    messages = [{"role": "user", "content": prompt}]
    decision = router.decide(messages, model=backend if forced else None)
    completion = Completion(text="an answer", backend=backend, model="m", usage=Usage(1, 1), timings=Timings(),
                            tool_calls=list(tool_calls) or None)
    return Outcome(decision, messages, "api", 0.1, result=RouteResult(completion, decision))


def test_a_request_teaches_the_boundary_it_stopped_at_or_the_one_below_the_top(tmp_path: Path) -> None:
    router = Router(load_config(_config(tmp_path, tiers=3)))
    short, long = "hi", "Prove, step by step and with care, " * 40
    low = router.decide([{"role": "user", "content": short}])
    assert low.tier == "low" and pair_of(router.tiers, _outcome(router, short, "low")) == Pair(0, 0, 1)
    top = router.decide([{"role": "user", "content": long}])
    assert top.tier == "top" and pair_of(router.tiers, _outcome(router, long, "top")) == Pair(1, 2, 1)
    assert pair_of(router.tiers, _outcome(router, short, "top")) is None  # a fallback from another tier answered
    assert pair_of(router.tiers, _outcome(router, short, "low", forced=True)) is None
    call = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert pair_of(router.tiers, _outcome(router, short, "low", tool_calls=tuple(call))) is None


# -- the shadow judge ------------------------------------------------------------------


def _judging_router(tmp_path: Path, judge_reply, **learn: Any) -> tuple[Router, dict[str, FakeBackend]]:
    loaded = load_config(_config(tmp_path, **learn))
    fakes = {
        "low": FakeBackend(loaded.config.backends["low"].settings("low"), responder=lambda r: "low answer"),
        "top": FakeBackend(loaded.config.backends["top"].settings("top"), responder=lambda r: "top answer"),
        "judge": FakeBackend(loaded.config.backends["judge"].settings("judge"), responder=judge_reply),
    }
    return Router(loaded, backends=fakes, source="api"), fakes


async def test_the_judge_is_asked_both_ways_each_with_its_own_nonce(tmp_path: Path) -> None:
    prefer_top = arbiter_responder(score=lambda text: 1.0 if "top answer" in text else 0.0, ties=True)
    router, fakes = _judging_router(tmp_path, lambda r: prefer_top(r.messages))
    await router.acomplete("hi")
    assert router.learner is not None
    await router.learner.drain()
    await router.aclose()
    prompts = [r.messages[-1]["content"] for r in fakes["judge"].calls]
    assert len(prompts) == 2 and prompts[0].index("low answer") < prompts[0].index("top answer")
    assert prompts[1].index("top answer") < prompts[1].index("low answer")
    nonces = {p.split("<question-")[1].split(">")[0] for p in prompts}
    assert len(nonces) == 2
    labels = open_store(router.config).labels(0)
    assert [(r.prompt, r.local, r.hosted, r.source) for r in labels] == [("hi", 0.0, 1.0, "shadow")]


async def test_a_verdict_without_this_runs_nonce_is_no_label(tmp_path: Path) -> None:
    # A judge echoing a ranking a candidate wrote (no nonce) gives no verdict; none is stored.
    router, _ = _judging_router(tmp_path, lambda r: "<ranking>1</ranking> Ranking: 1, 2")
    await router.acomplete("hi")
    assert router.learner is not None
    await router.learner.drain()
    await router.aclose()
    assert router.learner.counts.shadow["no-verdict"] == 1
    assert open_store(router.config).labels(0) == []


def test_the_worst_case_counts_the_other_answer_and_two_judge_calls(tmp_path: Path) -> None:
    router = Router(load_config(_config(tmp_path, max_tokens=1000, judge_max_tokens=100)))
    judge = router.learner.judge if router.learner else None
    assert isinstance(judge, ShadowJudge)
    # top: $1 per Mtok each way; the judge is free here
    assert judge.worst_case_usd([{"role": "user", "content": "x" * 400}], "top", 40) == pytest.approx(1101e-6)


async def test_judgements_beyond_the_budget_do_not_start(tmp_path: Path) -> None:
    router, fakes = _judging_router(tmp_path, lambda r: "", budget_usd_per_day=0.0015, max_tokens=1000)
    assert router.learner is not None
    for _ in range(3):
        await router.acomplete("hi")
        await router.learner.drain()
    await router.aclose()
    # each judgement may cost up to ~$0.001 (top's 1000 tokens): one fits in $0.0015, then the
    # real spend (a few tokens) leaves room for the next ones
    assert router.learner.counts.shadow["skipped-budget"] == 0
    assert len(fakes["top"].calls) == 3
    spent, calls = open_store(router.config).spend()
    assert calls == 9 and 0 < spent < 0.0015


async def test_a_judgement_stops_once_the_reported_usage_passes_its_reservation(tmp_path: Path) -> None:
    """An upstream that reports far more output tokens than max_tokens asked (a reasoning model
    billing its thinking, a server ignoring the limit): the answer's cost is recorded as
    reported, the judge -- which would read that long answer twice -- is not asked, and the
    spent budget starts nothing more."""
    config = _config(tmp_path, budget_usd_per_day=1.0, max_tokens=10)
    config["backends"]["top"]["price"] = {"input": 45000.0, "output": 45000.0}  # $0.045 a token
    config["backends"]["judge"]["price"] = {"input": 100.0, "output": 100.0}  # worst case: ~$0.5 in all, under $1
    loaded = load_config(config)
    fakes = {name: FakeBackend(loaded.config.backends[name].settings(name), responder=reply) for name, reply in (
        ("low", lambda r: "low answer"), ("top", lambda r: "word " * 2000), ("judge", lambda r: "1"))}
    router = Router(loaded, backends=fakes, source="api")
    assert router.learner is not None
    for _ in range(3):
        await router.acomplete("hi")
        await router.learner.drain()
    await router.aclose()
    assert len(fakes["top"].calls) == 1 and fakes["judge"].calls == []
    spent, calls = open_store(router.config).spend()
    assert calls == 1 and spent == pytest.approx(2001 * 0.045 + 0.045)  # as reported: 2001 words out, 1 in
    assert router.learner.counts.shadow["failed"] == 1 and router.learner.counts.shadow["skipped-budget"] == 2


# -- versions, boundary by boundary ------------------------------------------------------


def _shifted(weights: Weights, by: float) -> Weights:
    from dataclasses import replace

    return replace(weights, bias=weights.bias + by, threshold=0.42)


async def test_a_version_changes_only_its_own_boundary_and_rolls_back(tmp_path: Path) -> None:
    config = _config(tmp_path, tiers=3)
    router = Router(load_config(config))
    assert router.learner is not None
    routing, ladder = router.scorer, router.model.ladder
    store = open_store(router.config)
    learned = _shifted(Weights.load(), 3.0)
    version = store.adopt(0, 1, learned.to_json(), seen=0, heads={}, summary={})
    await router.learner.refresh()
    assert router.learner.version == version
    assert router.scorer is routing  # boundary 0 keeps the routing scorer
    heads = router.model.ladder.heads
    assert heads[0] is None and heads[1] is not None and heads[1][0] == f"learned v{version}"
    assert isinstance(heads[1][1], ComplexityScorer) and heads[1][1].weights.bias == learned.bias
    assert router.tiers[1].below == 0.7  # a fixed band stays; only `calibrated` follows the weights
    decision = router.decide([{"role": "user", "content": "hello there"}])
    assert [c.head for c in decision.crossings] in (["routing"], ["routing", f"learned v{version}"])
    rollback(router.config, 0)
    await router.learner.refresh()
    assert router.scorer is routing and router.model.ladder is ladder and router.learner.version == 0
    await router.aclose()


async def test_boundary_zero_learned_replaces_the_routing_scorer_and_its_calibrated_band(tmp_path: Path) -> None:
    router = Router(load_config(_config(tmp_path)))
    assert router.learner is not None
    learned = _shifted(Weights.load(), 1.0)
    version = open_store(router.config).adopt(0, 0, learned.to_json(), seen=0, heads={}, summary={})
    await router.learner.refresh()
    assert isinstance(router.scorer, ComplexityScorer) and router.scorer.weights.bias == learned.bias
    assert router.tiers[0].below == 0.42 and router.learner.version == version
    # a new router on the same store starts on the version in use
    again = Router(load_config(_config(tmp_path)))
    assert again.learner is not None and again.learner.version == version and again.tiers[0].below == 0.42
    await router.aclose()
    await again.aclose()


@pytest.mark.integration
async def test_a_fleet_uses_one_version(tmp_path: Path, redis_server, monkeypatch) -> None:
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    config = _config(tmp_path) | {"state": {"backend": "redis", "url": "${ROUTE_REDIS_URL}"}}
    replicas = [Router(load_config(config)), Router(load_config(config))]
    learned = _shifted(Weights.load(), 1.0)
    assert replicas[0].learner is not None
    version = replicas[0].learner.store.adopt(0, 0, learned.to_json(), seen=0, heads={}, summary={})
    for router in replicas:
        assert router.learner is not None
        await router.learner.refresh()
        assert router.learner.version == version and router.tiers[0].below == 0.42
    rollback(load_config(config).config)
    for router in replicas:
        assert router.learner is not None
        await router.learner.refresh()
        assert router.learner.version == 0
        await router.aclose()


# -- config ---------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "line", "words"), [
    (lambda c: c["routing"]["learn"].update(judge="jduge"), "judge", "Did you mean 'judge'"),
    (lambda c: c["routing"].update(scorer={"kind": "length"}), "scorer", "has no weights to learn"),
    (lambda c: c["routing"]["learn"].update(shadow_rate=2), "shadow_rate", "less than or equal to 1"),
    (lambda c: c["routing"]["learn"].update(budget_usd_per_dya=3), "budget", "Did you mean 'budget_usd_per_day'"),
])  # fmt: skip
def test_learning_config_errors_name_the_file_and_line(tmp_path: Path, change, line, words) -> None:
    config = _config(tmp_path)
    change(config)
    path = _write(tmp_path, config)
    with pytest.raises(ConfigError) as found:
        load_config(str(path))
    text = path.read_text(encoding="utf-8").splitlines()
    assert words in str(found.value)
    assert found.value.line is not None and line in text[found.value.line - 1], (str(found.value), found.value.line)


def test_without_a_diffusion_backend_shadow_judging_needs_a_judge(tmp_path: Path) -> None:
    config = _config(tmp_path)
    del config["routing"]["learn"]["judge"]
    config["backends"]["judge"]["decoding"] = "autoregressive"
    with pytest.raises(ConfigError, match="needs a judge"):
        load_config(str(_write(tmp_path, config)))
    config["backends"]["judge"]["decoding"] = "diffusion"
    assert load_config(str(_write(tmp_path, config))).config.routing.learn is not None  # the default judge


# -- the CLI --------------------------------------------------------------------------


def test_learn_status_history_rollback_and_resume(tmp_path: Path) -> None:
    config = _config(tmp_path)
    path = _write(tmp_path, config)
    store = open_store(load_config(config).config)
    store.add_labels([(0, "shadow", f"s{i}", f"prompt {i} " + "word " * i, float(i % 2), 1.0) for i in range(40)])
    store.add_spend(0.125, 3)
    first = store.adopt(0, 0, Weights.load().to_json(), seen=10, heads={}, summary={
        "labels": 10, "apgr_before": {"value": 0.5, "se": 0.1}, "apgr_after": {"value": 0.6, "se": 0.1},
        "gain": {"value": 0.1, "se": 0.05}})  # fmt: skip
    second = store.adopt(first, 0, Weights.load().to_json(), seen=40, heads={}, summary={"labels": 40})
    status = json.loads(runner.invoke(app, ["learn", "status", "--json", "-c", str(path)]).stdout)
    assert status == learn_status(load_config(config).config)
    assert status["version"] == second and status["labels"] == {"total": 40, "by_source": {
        "shadow": 40, "feedback": 0, "consortium": 0}, "stored": 40}  # fmt: skip
    assert status["boundaries"][0]["boundary"] == "low|top" and status["boundaries"][0]["judged_on"] == 0
    assert status["spend"]["today_usd"] == 0.125 and status["spend"]["left_usd"] == 0.875
    shown = runner.invoke(app, ["learn", "status", "-c", str(path)])
    assert shown.exit_code == 0 and "version in use: 2" in shown.stdout and "low|top: version 2" in shown.stdout
    table = runner.invoke(app, ["learn", "history", "-c", str(path)])
    assert table.exit_code == 0 and "0.500 ± 0.100 -> 0.600 ± 0.100" in table.stdout
    back = runner.invoke(app, ["learn", "rollback", "-c", str(path), "--json"])
    assert json.loads(back.stdout) == {"version": first, "previous": second, "pinned": True, "quarantined": []}
    assert history(load_config(config).config)["version"] == first
    status = learn_status(load_config(config).config)
    assert status["pinned"] and status["boundaries"][0]["judged_on"] == 30  # labels version 1 never saw
    assert status["boundaries"][0]["apgr"] is not None
    wrong = runner.invoke(app, ["learn", "rollback", "7", "-c", str(path)])
    assert wrong.exit_code == 2 and "no version 7" in wrong.output
    assert resume(load_config(config).config) == {"version": first, "pinned": False}
    assert rollback(load_config(config).config, 0)["version"] == 0


def test_route_stats_shows_what_shadow_judging_spent(tmp_path: Path) -> None:
    config = _config(tmp_path) | {"log": {"path": str(tmp_path / "route.db")}}
    path = _write(tmp_path, config)
    open_store(load_config(config).config).add_spend(0.5, 6)
    Store(tmp_path / "route.db").log([RequestRecord(source="api", status="ok", backend="low", cost_usd=0.01)])
    shown = runner.invoke(app, ["stats", "-c", str(path)])
    assert shown.exit_code == 0 and "shadow judging (routing.learn): $0.5000 today (UTC) of $1 a day, 6 calls" in shown.stdout
    as_json = json.loads(runner.invoke(app, ["stats", "--json", "-c", str(path)]).stdout)
    assert as_json["shadow_judging"]["today_usd"] == 0.5 and as_json["shadow_judging"]["today_calls"] == 6


def test_a_router_without_learning_has_no_learner(tmp_path: Path) -> None:
    config = _config(tmp_path)
    del config["routing"]["learn"]
    assert Router(load_config(config)).learner is None




def test_no_log_learns_nothing_and_opens_no_file(tmp_path: Path) -> None:
    router = Router(load_config(_config(tmp_path)), log=False)
    assert router.learner is None and not (tmp_path / "route.db").exists()
