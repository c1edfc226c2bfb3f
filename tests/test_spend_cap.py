"""The spend cap (`spend: {cap_usd, window_days}`) holds wherever a request enters: the Python
API, `route serve` and the CLI (tests/test_cli_newcomer.py) all refuse with the same clear error
once the logged spend of the window reaches the cap. Through the real Router, server and log,
against a real (not simulated) upstream: a simulated answer's cost is shown, never spent."""

from __future__ import annotations

import time

import httpx
import pytest

from backends.errors import UsageError
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.store import RequestRecord, Store
from tests.helpers import capped_config as _config

pytestmark = pytest.mark.integration


def test_the_python_api_refuses_once_the_spend_reaches_the_cap(paid, tmp_path):
    with Router(load_config(_config(tmp_path, paid))) as router:
        first = router.complete("hi")
        assert first.completion.cost_usd > 0.000001
        with pytest.raises(UsageError, match="spend cap reached") as caught:
            router.complete("hi again")
        with pytest.raises(UsageError, match="spend cap reached"):
            list(router.stream("and a stream"))
    assert "spend.cap_usd" in str(caught.value) and "\n" not in str(caught.value)
    assert len(paid.bodies) == 1


def test_a_new_process_counts_what_earlier_ones_spent(paid, tmp_path):
    with Router(load_config(_config(tmp_path, paid))) as router:
        router.complete("hi")
    with Router(load_config(_config(tmp_path, paid))) as later, pytest.raises(UsageError, match="spend cap reached"):
        later.complete("hi again")
    assert len(paid.bodies) == 1


def test_spend_outside_the_window_does_not_count(paid, tmp_path):
    Store(tmp_path / "route.db").log(RequestRecord(source="api", status="ok", cost_usd=100.0,
                                                   ts=time.time() - 3 * 86400))
    with Router(load_config(_config(tmp_path, paid, cap_usd=50.0, window_days=2))) as router:
        assert router.complete("hi").text == "paid answer"
    with Router(load_config(_config(tmp_path, paid, cap_usd=50.0, window_days=4))) as router:
        with pytest.raises(UsageError, match=r"\$100\.\d+ spent in the last 4 days"):
            router.complete("hi")


def test_route_serve_refuses_once_the_spend_reaches_the_cap(paid, tmp_path):
    router = Router(load_config(_config(tmp_path, paid)), source="server")
    chat = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    with RouteServer(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        assert client.post("/v1/chat/completions", json=chat).status_code == 200
        refused = [client.post("/v1/chat/completions", json=chat),
                   client.post("/v1/chat/completions", json={**chat, "stream": True}),
                   client.post("/v1/messages", json={**chat, "max_tokens": 16}),
                   client.post("/v1/responses", json={"model": "auto", "input": "hi"})]
    for response in refused:
        assert response.status_code == 400, response.text
        assert "spend cap reached" in response.text
    assert len(paid.bodies) == 1


def test_simulated_answers_are_never_spent(sim, tmp_path):
    with Router(load_config(_config(tmp_path, sim))) as router:
        answers = [router.complete(f"hi {i}") for i in range(3)]
    assert all(a.completion.cost_usd > 0.000001 and a.completion.metadata.get("simulated") for a in answers)
    assert Store(tmp_path / "route.db").spent_usd(0.0) == 0.0
    assert sim.stats("m-paid")["requests"] == 3
