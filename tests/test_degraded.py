"""A consortium that answered with less than configured (its arbiter failed, members lost) says
so: in the completion's metadata, and through the server as a header and a `route` field."""

from __future__ import annotations

import httpx
import openai
import pytest

from router.config_loader import load_config
from router.consortium.degraded import degraded
from router.core import Router
from router.server import RouteServer

pytestmark = pytest.mark.integration


def _router(sim) -> Router:
    def backend(model: str, url: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": url, "max_retries": 0, "timeout_s": 10}

    return Router(load_config({
        "backends": {"glm": backend("glm-5.2", sim.base_url), "judge": backend("judge", "http://127.0.0.1:9/v1")},
        "routing": {"tiers": [{"name": "all", "backends": ["glm"]}]},
        "consortia": {"pair": {"members": ["glm*2"], "arbiter": "judge", "retries": 0},
                      "full": {"members": ["glm*2"], "arbiter": "glm", "retries": 0}},
    }), source="server", log=False)


def test_a_full_run_is_not_degraded(sim):
    with _router(sim) as router:
        assert "degraded" not in router.complete("hi", model="full").completion.metadata


def test_a_failed_arbiter_is_named_in_the_metadata(sim):
    with _router(sim) as router:
        lost = router.complete("hi", model="pair").completion.metadata["degraded"]
    assert len(lost) == 1 and "pair, round 1: arbiter judge failed" in lost[0] and "unjudged" in lost[0]


def test_nested_losses_are_listed_with_their_path():
    inner = {"consortium": "inner", "rounds": [{"iteration": 1, "members": [
        {"member": "a", "sample": 1, "status": "failed"}, {"member": "a", "sample": 2, "status": "done"}],
        "arbiter": {"arbiter": "j", "status": "done"}}]}
    outer = {"consortium": "outer", "rounds": [{"iteration": 1, "members": [
        {"member": "inner", "sample": 1, "status": "done", "trace": inner}],
        "arbiter": {"arbiter": "j", "status": "failed", "errors": [{"error": "BackendTimeout", "message": "slow"}]}}]}
    assert degraded(outer) == ["outer, round 1: arbiter j failed (slow); the answer is an unjudged member answer",
                               "outer/inner, round 1: 1 of 2 member calls failed (a#1)"]


def test_the_server_sends_a_header_and_a_field(sim):
    router = _router(sim)
    with RouteServer(router) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=20)
        raw = client.chat.completions.with_raw_response.create(model="pair", messages=[{"role": "user", "content": "hi"}])
        assert raw.headers["x-route-degraded"].startswith("1; pair, round 1: arbiter judge failed")
        assert "judge" in raw.http_response.json()["route"]["degraded"][0]
        full = client.chat.completions.with_raw_response.create(model="full", messages=[{"role": "user", "content": "hi"}])
        assert "x-route-degraded" not in full.headers and "route" not in full.http_response.json()
        # Streamed: headers go out before the run ends, so the last choice event carries the field.
        with httpx.stream("POST", f"{server.base_url}/chat/completions", timeout=20, json={
                "model": "pair", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) as response:
            events = [line for line in response.iter_lines() if line.startswith("data: {")]
        assert '"route":{"degraded":["pair, round 1: arbiter judge failed' in events[-1]


def _nested_router(sim) -> Router:
    """An outer consortium whose member is an inner one; one inner member is far slower than
    the request's deadline."""
    from tests.helpers import use_arbiter

    use_arbiter(sim, "judge-m")
    sim.update_profile("m-late", ttft_s=30.0)

    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, "timeout_s": 60}

    return Router(load_config({
        "backends": {"quick": backend("m-quick"), "late": backend("m-late"), "judge": backend("judge-m")},
        "routing": {"tiers": [{"name": "all", "backends": ["quick"]}]},
        "consortia": {"inner": {"members": ["quick", "late"], "arbiter": "judge", "retries": 0},
                      "outer": {"members": ["inner", "quick"], "arbiter": "judge", "retries": 0}},
    }), source="api", log=False)


def test_a_member_lost_to_the_deadline_marks_the_answer_degraded_at_depth_2(sim):
    """deadline_s=10 (the late member takes 30 s; the quick one and the judge answer at once, with
    room on a loaded machine): the inner consortium answers with its quick member alone; the outer
    answer must say that a member was lost two levels down."""
    with _nested_router(sim) as router:
        result = router.complete("hi", model="outer", deadline_s=10.0)
    lost = result.completion.metadata.get("degraded")
    assert lost, "a member lost to the deadline two levels down must mark the answer degraded"
    assert any(line.startswith("outer/inner, round 1: 1 of 2 member calls failed (late#1, out of time)")
               for line in lost), lost
    assert sim.stats("m-late")["cancelled"] == 1  # the slow call was stopped, not left running


def test_a_member_lost_to_the_deadline_marks_a_single_consortium_degraded(sim):
    with _nested_router(sim) as router:
        result = router.complete("hi", model="inner", deadline_s=10.0)
    assert result.completion.metadata.get("degraded") == [
        "inner, round 1: 1 of 2 member calls failed (late#1, out of time)"]
