"""Learning from zero and `on_deadline_risk`, through the Router, the server and the request log,
against the simulated model server on loopback.

Timings are chosen far apart (answers in milliseconds against deadlines of seconds, or priors of
seconds against a deadline of half a second), so no assertion depends on how busy the machine is.
"""

from __future__ import annotations

import json

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from backends.errors import DeadlineAtRisk
from router.cli.app import app
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.store import Store

pytestmark = pytest.mark.integration

HEAVY = "Explain, step by step, how a B-tree stays balanced on insertion and deletion. " * 6  # > 300 chars
LIGHT = "hi"


def config(sim, *, heavy_prior: dict | None = None, **routing) -> dict:
    """Two tiers on the simulator: `light` (one fast model) below a length score of 0.5, `heavy`
    (two models). No `latency:` priors unless asked for."""
    def backend(model: str, prior: dict | None = None, **extra) -> dict:
        spec = {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, "timeout_s": 30, **extra}
        if prior:
            spec["latency"] = prior
        return spec

    return {
        "backends": {"light": backend("m-light"),
                     "heavy-a": backend("m-heavy-a", heavy_prior, price={"input": 1, "output": 2}),
                     "heavy-b": backend("m-heavy-b", heavy_prior, price={"input": 3, "output": 15})},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 300},
                    "tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                              {"name": "heavy", "backends": ["heavy-a", "heavy-b"]}],
                    **routing},
    }


def fast(sim, *models: str) -> None:
    for model in models:
        sim.update_profile(model, ttft_s=0.0, tokens_per_s=None, answer_tokens=20)


def test_with_no_priors_a_heavy_stream_is_served_by_the_heavy_tier_from_the_first_request(sim):
    """N = 0: every heavy prompt is answered at its tier, and each of the tier's N=2 untried
    backends is measured on its own first request (explored ahead of the winner)."""
    fast(sim, "m-light", "m-heavy-a", "m-heavy-b")
    # Downgrading allowed, and the light tier measured and fast: the case where a router that
    # trusts guesses over measurements sends every hard prompt to the light model.
    with Router(load_config(config(sim, on_deadline_risk="downgrade")), log=False) as router:
        for _ in range(3):
            assert router.complete(LIGHT, deadline_s=3.0).backend == "light"
        untried = router.decide([{"role": "user", "content": HEAVY}], deadline_s=3.0)
        assert untried.tier == "heavy" and untried.downgrade is None
        assert {c["backend"]: c["known"] for c in untried.details["candidates"]}["heavy-a"] is False
        answered_by = [router.complete(HEAVY, deadline_s=3.0).backend for _ in range(20)]
    assert set(answered_by) <= {"heavy-a", "heavy-b"}
    assert answered_by[:2] == ["heavy-b", "heavy-a"]  # the untried one explored, then the cheaper winner
    assert answered_by[2:] == ["heavy-a"] * 18  # measured: the cheaper one of the tier
    assert sim.stats("m-light")["requests"] == 3


def test_a_planned_downgrade_is_in_the_decision_the_headers_the_body_the_log_and_stats(sim, tmp_path):
    fast(sim, "m-light")
    # The heavy tier is known (from its priors) to take seconds; the heavy tier's deadline is 0.5 s.
    cfg = config(sim, heavy_prior={"ttft_ms": 3000, "tokens_per_s": 20})
    cfg["routing"]["tiers"][1].update(deadline_ms=500, on_deadline_risk="downgrade")
    cfg["log"] = {"path": str(tmp_path / "route.db")}
    router = Router(load_config(cfg), source="server")
    explained = router.decide([{"role": "user", "content": HEAVY}])
    assert explained.chosen == "light" and explained.downgrade is not None
    assert explained.as_dict()["downgrade"]["from_tier"] == "heavy"
    assert explained.reason.count("DOWNGRADE to tier 'light'") == 1
    with RouteServer(router) as server:
        response = httpx.post(f"{server.base_url}/chat/completions", timeout=10,
                              json={"model": "auto", "messages": [{"role": "user", "content": HEAVY}]})
        streamed = httpx.post(f"{server.base_url}/chat/completions", timeout=10,
                              json={"model": "auto", "stream": True, "messages": [{"role": "user", "content": HEAVY}]})
        plain = httpx.post(f"{server.base_url}/chat/completions", timeout=10,
                           json={"model": "auto", "messages": [{"role": "user", "content": LIGHT}]})
    router.request_log.flush()
    assert response.status_code == 200 and response.headers["x-route-downgraded"] == "heavy->light"
    assert response.headers["x-route-answered-by"] == "light"
    assert response.json()["route"]["downgraded"]["to_tier"] == "light"
    assert streamed.headers["x-route-downgraded"] == "heavy->light"
    assert "x-route-downgraded" not in plain.headers and "route" not in plain.json()
    records = {r["prompt"][:20]: r for r in Store(tmp_path / "route.db").recent(5)}
    assert records[HEAVY[:20]]["decision"]["downgraded"]["reason"].startswith("no backend of tier 'heavy'")
    assert "downgraded" not in records[LIGHT]["decision"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    stats = CliRunner().invoke(app, ["stats", "--json", "-c", str(tmp_path / "c.yaml")])
    assert stats.exit_code == 0, stats.output
    tiers = {t["tier"]: t for t in json.loads(stats.stdout)["tiers"]}
    assert tiers["heavy"]["requests"] == 2 and tiers["heavy"]["downgraded"] == 2
    assert tiers["heavy"]["downgraded_to"] == {"light": 2}
    assert tiers["light"]["downgraded"] == 0
    table = CliRunner().invoke(app, ["stats", "-c", str(tmp_path / "c.yaml")])
    assert "per tier" in table.stdout and "2 (100%)" in table.stdout
    explain = CliRunner().invoke(app, ["ask", "--explain", "-c", str(tmp_path / "c.yaml"), HEAVY])
    assert explain.exit_code == 0 and "DOWNGRADE" in explain.stdout and "tier heavy -> light" in explain.stdout
    as_json = CliRunner().invoke(app, ["ask", "--explain", "--json", "-c", str(tmp_path / "c.yaml"), HEAVY])
    assert json.loads(as_json.stdout)["downgrade"]["to_tier"] == "light"


def test_the_default_keeps_the_quality_and_marks_a_weaker_answer_after_failures(sim):
    fast(sim, "m-light", "m-heavy-a", "m-heavy-b")
    # The heavy tier's prior (a first token in 10 minutes) is far beyond the 30 s deadline; the
    # simulator answers at once, so the real call has all of it, whatever the machine's load.
    with Router(load_config(config(sim, heavy_prior={"ttft_ms": 600_000, "tokens_per_s": 20})), log=False) as router:
        # Known too slow for the deadline: best effort at the prompt's quality, no weaker tier.
        decision = router.decide([{"role": "user", "content": HEAVY}], deadline_s=30.0)
        assert decision.plan.on_deadline_risk == "best-effort"
        assert decision.candidates[:2] == ("heavy-a", "heavy-b") and decision.downgrade is None
        result = router.complete(HEAVY, deadline_s=30.0)  # the simulator is faster than the prior
        assert result.backend == "heavy-a" and result.downgrade is None
        assert result.as_dict()["downgraded"] is None
        # Every at-quality backend fails: a weaker answer beats none, and says so.
        sim.set_faults("m-heavy-a", ["500"])
        sim.set_faults("m-heavy-b", ["500"])
        result = router.complete(HEAVY, deadline_s=30.0)
    assert result.backend == "light"
    assert result.downgrade is not None and not result.downgrade.planned
    assert result.as_dict()["downgraded"]["reason"].startswith("every backend of tier 'heavy'")


def test_fail_raises_a_clear_deadline_error_without_calling_a_weaker_tier(sim, tmp_path):
    fast(sim, "m-light", "m-heavy-a", "m-heavy-b")
    cfg = config(sim, heavy_prior={"ttft_ms": 3000, "tokens_per_s": 20}, on_deadline_risk="fail")
    with Router(load_config(cfg), log=False) as router:
        with pytest.raises(DeadlineAtRisk) as caught:
            router.complete(HEAVY, deadline_s=0.5)
        # The light tier may make it (untried, so not ruled out): decided, not refused. Its call
        # gets a roomy deadline: a real call held to 0.5 s would time the machine.
        light = router.decide([{"role": "user", "content": LIGHT}], deadline_s=0.5)
        assert light.chosen == "light" and light.details["candidates"][0]["could_meet_deadline"]
        light_answer = router.complete(LIGHT, deadline_s=30)
    message = str(caught.value)
    assert "no backend of tier 'heavy' or above is predicted to meet the 0.50s deadline" in message
    assert "on_deadline_risk is `fail`" in message and "nothing was called" in message
    assert caught.value.tier == "heavy" and caught.value.deadline_s == 0.5
    assert light_answer.backend == "light"
    assert [sim.stats(m)["requests"] for m in ("m-light", "m-heavy-a", "m-heavy-b")] == [1, 0, 0]
    # At the shell: exit code 3, the message, no traceback; through the server: 504.
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    ran = CliRunner().invoke(app, ["ask", "--deadline", "500ms", "--no-log", "-c", str(tmp_path / "c.yaml"), HEAVY])
    assert ran.exit_code == 3 and "DeadlineAtRisk" in ran.output and "Traceback" not in ran.output
    router = Router(load_config(cfg), source="server", log=False)
    cfg_tiers = router.tiers
    assert cfg_tiers[1].on_deadline_risk is None  # routing-wide `fail` applies
    with RouteServer(Router(load_config({**cfg, "routing": {**cfg["routing"], "deadline_ms": 500}}),
                            source="server", log=False)) as server:
        refused = httpx.post(f"{server.base_url}/chat/completions", timeout=10,
                             json={"model": "auto", "messages": [{"role": "user", "content": HEAVY}]})
    assert refused.status_code == 504 and refused.json()["error"]["code"] == "deadline_at_risk"
    assert [sim.stats(m)["requests"] for m in ("m-light", "m-heavy-a", "m-heavy-b")] == [1, 0, 0]


def test_on_deadline_risk_is_checked_when_the_config_loads(tmp_path):
    from backends.errors import ConfigError

    cfg = {"backends": {"a": {"kind": "fake", "model": "a"}},
           "routing": {"tiers": [{"name": "t", "backends": ["a"], "on_deadline_risk": "downgrade-silently"}]}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert "on_deadline_risk" in str(caught.value) and "bad.yaml:" in str(caught.value)


def test_a_stream_that_falls_back_to_a_weaker_tier_says_so_in_its_headers(sim):
    """Headers go out with a stream's first content, by when the answering backend is known: a
    heavy prompt whose heavy tier fails before its first text, answered by the light tier, is
    a downgrade the client is told of (before, the headers named the planned backend only)."""
    fast(sim, "m-light")
    for model in ("m-heavy-a", "m-heavy-b"):
        sim.update_profile(model, fault="500")
    router = Router(load_config(config(sim)), source="server", log=False)
    with RouteServer(router) as server, httpx.stream(
            "POST", f"{server.base_url}/chat/completions", timeout=10,
            json={"model": "auto", "stream": True, "messages": [{"role": "user", "content": HEAVY}]}) as streamed:
        streamed.read()
    assert streamed.status_code == 200
    assert streamed.headers["x-route-tier"] == "heavy" and streamed.headers["x-route-answered-by"] == "light"
    assert streamed.headers["x-route-downgraded"] == "heavy->light"
