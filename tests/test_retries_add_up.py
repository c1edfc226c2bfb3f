"""Retries that add up (issue 29): a client retrying against a dead upstream costs a bounded
number of upstream calls; an open breaker answers at once with Retry-After; a refused
connection fails over without retries; clients see the backend's name, never its address; and
`route serve` says what happened to each request on its console (`--quiet` turns that off)."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest

from policies.breaker import BreakerBoard
from policies.retry import RetryBudget, RetryBudgetSettings
from router import Router
from router.config_loader import load_config
from router.server import RouteServer
from tests.ports import free_port, refusing_port, wait_until_serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parent.parent


def _config(sim, **backends) -> dict:
    specs = {name: {"kind": "openai", "model": model, "base_url": url or sim.base_url, "max_retries": 2}
             for name, (model, url) in backends.items()}
    return {"backends": specs, "routing": {"tiers": [{"name": "only", "backends": list(backends)}],
                                           "breaker": {"failures": 3, "cooldown_ms": 60_000}}}


def test_a_client_retrying_30_times_against_a_dead_upstream_costs_one_call_per_request_until_known_dead(sim):
    """Issue 29: every client retry cost three upstream calls (90 for Codex's 30). Issue 38: the
    server leaves a backend not yet heard answering to its client's own retries (one call per
    request, as going direct), its breaker opens after three, and until its next probe is due
    (a minute here) the other 27 are answered 503 at once, calling nothing. Every 503 says when
    to ask again, as the router knows it, never sooner than a second (issue 47: "0" invited a
    storm): a second while the breaker is closed, then the probe a minute away (this test's
    pace; the default pace is the next test's)."""
    sim.update_profile("dead-m", fault="500")
    config = _config(sim, dead=("dead-m", None))
    config["routing"]["breaker"]["probe_ms"] = 60_000
    router = Router(load_config(config), source="server", clients_retry=True)
    with RouteServer(router) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        statuses, waits = [], []
        for _ in range(30):
            with pytest.raises(openai.APIStatusError) as failed:
                client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "hi"}])
            statuses.append(failed.value.status_code)
            headers = failed.value.response.headers
            waits.append((headers.get("retry-after"), headers.get("retry-after-ms")))
    assert sim.stats("dead-m")["requests"] == 3
    assert set(statuses) == {503}
    assert waits[:2] == [("1", "1000")] * 2  # the breaker still closed: the shortest wait, a second
    for seconds, ms in waits[2:]:  # the third opened it: its probe a minute away, counting down
        assert 59_000 < int(ms) <= 60_000 and 0 <= 1000 * int(seconds) - int(ms) < 1000, waits  # both rounded up


def _on_a_clock(router: Router) -> list[float]:
    """The router's breakers on a clock the test moves (monotonic seconds): a client's wait of a
    minute costs the test nothing, and its probe falls due as it would have."""
    now = [1000.0]
    router.breakers = router.calls.breakers = BreakerBoard(lambda: now[0], router.breakers.settings)
    return now


_ASK = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}


def test_a_client_that_waits_what_a_503_says_reaches_the_upstream_each_time(sim):
    """Retry-After is true, never "0" (issue 47): with the default probe pace each 503 from a dead
    upstream asks for the wait to the breaker's next probe -- a second, doubling per failed probe
    to 16 s, as a client backs off going direct -- and a client back after that long is answered
    by a call to the upstream, not by the breaker."""
    sim.update_profile("dead-m", fault="500")
    router = Router(load_config(_config(sim, dead=("dead-m", None))), source="server", clients_retry=True)
    now = _on_a_clock(router)
    with RouteServer(router) as srv, httpx.Client(base_url=srv.base_url, timeout=30) as client:
        for _ in range(3):  # the breaker opens on the third
            assert client.post("/chat/completions", json=_ASK).status_code == 503
        waits = []
        for _ in range(6):
            failed = client.post("/chat/completions", json=_ASK)
            assert failed.status_code == 503
            wait_s = int(failed.headers["retry-after-ms"]) / 1000
            assert failed.headers["retry-after"] == str(math.ceil(wait_s)), failed.headers
            waits.append(wait_s)
            calls = sim.stats("dead-m")["requests"]
            now[0] += wait_s
            assert client.post("/chat/completions", json=_ASK).status_code == 503
            assert sim.stats("dead-m")["requests"] == calls + 1, f"told to wait {wait_s} s, then not called"
    assert waits == [1, 2, 4, 8, 16, 16]


@pytest.mark.parametrize(("client", "retries", "outage_s"), [
    ("the OpenAI SDK", 2, 2.0),  # 0.5 s then 1 s of its own backoff: direct it gives up before 2 s
    ("Codex", 29, 10.0),  # 24 s of its own backoff direct; through route it gave up after 2.8 s
    ("Claude Code", 10, 60.0),  # 0.5 s doubling to 32 s direct, over two minutes
])
def test_a_client_obeying_retry_after_finishes_its_task_after_an_outage_it_survives_direct(sim, client, retries,
                                                                                          outage_s):
    """The neighbour of every 503: a client whose own retries outlast the outage going direct,
    obeying Retry-After through route, ends with its answer, not an error."""
    sim.update_profile("dead-m", fault="500")
    router = Router(load_config(_config(sim, dead=("dead-m", None))), source="server", clients_retry=True)
    now = _on_a_clock(router)
    back_at = now[0] + outage_s
    statuses = []
    with RouteServer(router) as srv, httpx.Client(base_url=srv.base_url, timeout=30) as http:
        for _ in range(retries + 1):
            answer = http.post("/chat/completions", json={**_ASK, "model": "dead"})
            statuses.append(answer.status_code)
            if answer.status_code == 200:
                break
            now[0] += int(answer.headers["retry-after"])
            if now[0] >= back_at:
                sim.update_profile("dead-m", fault=None)
    assert statuses[-1] == 200, f"{client} gave up through route after {statuses}"


def test_the_first_request_to_three_dead_backends_costs_one_call_each(sim):
    """Issue 38: it cost nine (three attempts each) and 3.8 s; a backend not yet heard answering
    is failed over at once, and `route serve`'s client retries on its own."""
    sim.update_profile("dead-m", fault="500")
    config = _config(sim, a=("dead-m", None), b=("dead-m", None), c=("dead-m", None))
    config["routing"]["tiers"] = [{"name": "t1", "below": 0.3, "backends": ["a"]},
                                  {"name": "t2", "below": 0.6, "backends": ["b"]}, {"name": "t3", "backends": ["c"]}]
    router = Router(load_config(config), source="server", clients_retry=True)
    with RouteServer(router) as srv:
        failed = httpx.post(f"{srv.base_url}/chat/completions", timeout=30,
                            json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert failed.status_code == 503 and failed.headers["retry-after"] == "1"
    assert sim.stats("dead-m")["requests"] == 3


def test_the_retry_budget_stops_retries_across_requests_before_any_breaker():
    budget = RetryBudget(RetryBudgetSettings(max_tokens=10, token_ratio=0.1))
    allowed = []
    for _ in range(20):  # a dead upstream: every attempt fails
        allowed.append(budget.allows_retry("x"))
        budget.record("x", ok=False)
    assert allowed == [True] * 5 + [False] * 15  # retries stop after half the bucket
    for _ in range(60):  # successes refill it, a tenth of a token each
        budget.record("x", ok=True)
    assert budget.allows_retry("x") and budget.allows_retry("another backend")


async def test_a_refused_connection_is_not_retried_and_fails_over_at_once(sim):
    attempts: list[str] = []
    with refusing_port() as port:
        config = _config(sim, gone=("m", f"http://127.0.0.1:{port}/v1"), ok=("m-small", None))
        config["routing"]["tiers"] = [{"name": "first", "below": 0.99, "backends": ["gone"]},
                                      {"name": "then", "backends": ["ok"]}]
        router = Router(load_config(config), observers=[lambda attempt, decision: attempts.append(attempt.backend)])
        result = await router.acomplete("hi")
    assert result.backend == "ok" and attempts == ["gone", "ok"]  # one attempt, no retries
    assert type(result.failures[0]).__name__ == "Unreachable"
    await router.aclose()


def test_clients_are_told_the_backend_never_its_address(sim):
    with refusing_port() as port:
        router = Router(load_config(_config(sim, gone=("m", f"http://127.0.0.1:{port}/v1"))), source="server", clients_retry=True)
        with RouteServer(router) as srv:
            response = httpx.post(f"{srv.base_url}/chat/completions", timeout=30,
                                  json={"model": "gone", "messages": [{"role": "user", "content": "hi"}]})
    message = response.json()["error"]["message"]
    assert response.status_code == 503 and "gone" in message
    assert f"127.0.0.1:{port}" not in message and str(port) not in message, message


def _serve(config_file: Path, port: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config",
                             str(config_file), "--no-log", *extra], env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)


def _serve_one_answer_and_one_failure(config_file: Path, quiet: bool) -> str:
    """What `route serve` printed for a request `small` answers and one `gone` cannot."""
    port = free_port()
    proc = _serve(config_file, port, *(["--quiet"] if quiet else []))
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0, timeout=30)
        client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(model="gone", messages=[{"role": "user", "content": "hi"}])
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.stdout is not None
    return proc.stdout.read().decode()


@pytest.mark.integration
@pytest.mark.parametrize("quiet", [False, True])
def test_route_serve_logs_one_line_per_request_unless_quiet(sim, tmp_path, quiet):
    sim.update_profile("m-small", ttft_s=0.0, tokens_per_s=None)
    config_file = tmp_path / "serve.yaml"
    import json

    with refusing_port() as gone:
        config_file.write_text(json.dumps(_config(sim, small=("m-small", None),
                                                  gone=("m", f"http://127.0.0.1:{gone}/v1"))))
        output = _serve_one_answer_and_one_failure(config_file, quiet)
    ok = re.search(r"POST /v1/chat/completions 200 small \d+ ms", output)
    failed = re.search(r"POST /v1/chat/completions 503 - \d+ ms: .*gone.*cannot connect", output)
    if quiet:
        assert ok is None and failed is None, output
    else:
        assert ok is not None and failed is not None, output
