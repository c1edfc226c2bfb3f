"""Feedback on routed requests: the server endpoint, `route feedback`, consortium preferences,
and `route calibrate --from-log` adjusting the weights to a synthetic feedback stream (labels
from tests/data/feedback_sample.jsonl, a credited sample of the shared LLMRouter set)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import httpx
import typer
import yaml
from typer.testing import CliRunner

from policies.complexity import ComplexityScorer
from policies.complexity.training.fit import is_held_out
from router.cli.scoring_cmds import register
from router.config_loader import load_config
from router.consortium.simulated import arbiter_responder
from router.core import Router
from router.server import RouteServer
from router.store import RequestRecord, Store
from router.store.feedback import consortium_preferences, labelled_records

SAMPLE = Path(__file__).parent / "data" / "feedback_sample.jsonl"
runner = CliRunner()


def app() -> typer.Typer:
    a = typer.Typer()
    register(a)
    return a


def config_file(tmp_path: Path, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": base_url, "max_retries": 0, "timeout_s": 10}

    config = {
        "backends": {"small": backend("m-small"), "big": backend("m-big")},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 200},
                    "tiers": [{"name": "low", "below": 0.5, "backends": ["small"]}, {"name": "high", "backends": ["big"]}]},
        "log": {"path": str(tmp_path / "route.db")},
    }  # fmt: skip
    path = tmp_path / "route.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_server_feedback_is_recorded_against_the_request_log(sim, tmp_path: Path) -> None:
    router = Router(load_config(str(config_file(tmp_path, sim.base_url))), source="server")
    with RouteServer(router) as srv:
        answer = httpx.post(f"{srv.base_url}/chat/completions", timeout=20,
                            json={"model": "auto", "messages": [{"role": "user", "content": "hi there"}]})  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert router.request_log is not None and router.request_log.flush()
        logged = Store(tmp_path / "route.db").recent(1)[0]
        assert logged["backend"] == "small"
        ok = httpx.post(f"{srv.base_url}/feedback", json={"id": logged["id"], "verdict": "bad"}, timeout=20)
        assert ok.status_code == 200 and ok.json() == {"recorded": True}
        wrong = httpx.post(f"{srv.base_url}/feedback", json={"id": logged["id"], "verdict": "meh"}, timeout=20)
        assert wrong.status_code == 400 and "good" in wrong.json()["error"]["message"]
        missing = httpx.post(f"{srv.base_url}/feedback", json={"verdict": "good"}, timeout=20)
        assert missing.status_code == 400
    labels = labelled_records(Store(tmp_path / "route.db"), {"small"})
    # the local tier answered and the user said bad: the hosted model was needed
    assert [(r["prompt"], r["local"], r["hosted"]) for r in labels] == [("hi there", 0.0, 1.0)]


def test_cli_and_router_feedback_write_the_same_table(tmp_path: Path) -> None:
    cfg = config_file(tmp_path)
    store = Store(tmp_path / "route.db")
    store.log([RequestRecord(source="cli", status="ok", backend="small", prompt="p1"),
               RequestRecord(source="cli", status="ok", backend="big", prompt="p2")])  # fmt: skip
    first, second = sorted(r["id"] for r in store.recent(2))
    result = runner.invoke(app(), ["feedback", str(first), "good", "-c", str(cfg)])
    assert result.exit_code == 0, result.output
    Router(load_config(str(cfg))).feedback(second, "bad")
    bad = runner.invoke(app(), ["feedback", str(first), "great", "-c", str(cfg)])
    assert bad.exit_code == 2 and "`good` or `bad`" in bad.output
    labels = labelled_records(Store(tmp_path / "route.db"), {"small"})
    assert [(r["prompt"], r["local"], r["hosted"]) for r in labels] == [("p1", 1.0, 1.0), ("p2", 0.0, 0.0)]


def test_consortium_rankings_become_preferences() -> None:
    def round_(order: list[str]) -> dict:
        members = [{"member": "small", "sample": 1}, {"member": "big", "sample": 1}, {"member": "small", "sample": 2}]
        return {"members": members, "arbiter": {"order": order}}

    trace = {"rounds": [round_(["big#1", "small#1", "small#2"]), round_(["small#2", "big#1"]), round_([])]}
    assert consortium_preferences(trace, {"small"}) == [(0.0, 1.0), (1.0, 0.0)]
    assert consortium_preferences({"rounds": [round_(["small#1", "small#2"])]}, {"small"}) == []


def _synthetic_stream(tmp_path: Path) -> Path:
    """Route each sample prompt with the shipped scorer (local below its threshold), then say
    good when the model that answered scored at least 0.5 on it, else bad."""
    cfg = config_file(tmp_path)
    store = feedback = Store(tmp_path / "route.db")
    scorer = ComplexityScorer.load()
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    store.log([
        RequestRecord(source="api", status="ok", prompt=r["prompt"],
                      backend="small" if scorer.score_text(r["prompt"]) < scorer.threshold else "big")
        for r in records
    ])  # fmt: skip
    for row, r in zip(sorted(store.recent(len(records)), key=lambda x: x["id"]), records):
        quality = r["local"] if row["backend"] == "small" else r["hosted"]
        feedback.add_verdict(row["id"], "good" if quality >= 0.5 else "bad")
    return cfg


def _calibrate(cfg: Path, out: Path) -> dict:
    result = runner.invoke(app(), ["calibrate", "--from-log", "-c", str(cfg), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_calibrate_from_log_improves_apgr_on_a_held_back_slice(tmp_path: Path) -> None:
    cfg = _synthetic_stream(tmp_path)
    out = tmp_path / "adjusted.json"
    summary = _calibrate(cfg, out)
    assert summary["labels"] >= 300 and summary["held_back"] >= 90  # hosted answers judged good say nothing
    assert summary["installed"] and summary["apgr_after"] >= summary["apgr_before"] + 0.1, summary
    adjusted = ComplexityScorer.load(out)
    assert adjusted.weights.metadata["adjusted_on"] == summary["labels"] - summary["held_back"]


def test_calibrate_from_log_never_installs_worse_weights(tmp_path: Path) -> None:
    # Every prompt answered locally; on the held-back slice the local answer was bad exactly for
    # the prompts the current weights score highest (they order it perfectly), while the
    # training slice says the opposite: adjusting to it can only make the order worse.
    cfg = config_file(tmp_path)
    store = feedback = Store(tmp_path / "route.db")
    scorer = ComplexityScorer.load()
    prompts = [json.loads(line)["prompt"] for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    store.log([RequestRecord(source="api", status="ok", backend="small", prompt=p) for p in prompts])
    rows = sorted(store.recent(len(prompts)), key=lambda x: x["id"])
    median = sorted(scorer.score_text(p) for p in prompts)[len(prompts) // 2]
    for row in rows:
        hard = scorer.score_text(row["prompt"]) >= median
        # labelled_records names a verdict's record "f" + its feedback id: the same as the row id here
        truth = hard if is_held_out(f"f{row['id']}") else not hard
        feedback.add_verdict(row["id"], "bad" if truth else "good")
    out = tmp_path / "adjusted.json"
    summary = _calibrate(cfg, out)
    assert summary["apgr_after"] < summary["apgr_before"] and not summary["installed"], summary
    assert not out.exists()


def test_calibrate_from_log_without_feedback_is_a_usage_error(tmp_path: Path) -> None:
    cfg = config_file(tmp_path)
    result = runner.invoke(app(), ["calibrate", "--from-log", "-c", str(cfg), "--out", str(tmp_path / "w.json")])
    assert result.exit_code == 2 and "route feedback" in result.output


def test_a_consortium_ranking_local_against_hosted_is_recorded_as_a_preference(sim, tmp_path: Path) -> None:
    fast = {"ttft_s": 0.0, "tokens_per_s": None}
    sim.update_profile("m-small", **fast)
    sim.update_profile("m-big", **fast)
    sim.update_profile("mercury-2", ttft_s=0.0, canvas_s=0.0)
    state = sim.app.state.sim  # the arbiter prefers the hosted member's answer
    state.profiles["mercury-2"] = dataclasses.replace(
        state.profile("mercury-2"), responder=arbiter_responder(score=lambda text: float("m-big" in text))
    )
    config = yaml.safe_load(config_file(tmp_path, sim.base_url).read_text(encoding="utf-8"))
    config["backends"]["arbiter"] = {"kind": "openai", "model": "mercury-2", "base_url": sim.base_url, "max_retries": 0}
    config["consortia"] = {"mix": {"members": ["small", "big"], "arbiter": "arbiter", "judging": "rank"}}
    with Router(load_config(config)) as router:
        router.complete("Which of these statements is true?", model="mix")
    labels = labelled_records(Store(tmp_path / "route.db"), {"small"})
    assert [(r["prompt"], r["local"], r["hosted"], r["source"]) for r in labels] == [
        ("Which of these statements is true?", 0.0, 1.0, "consortium")
    ]
