"""A storm against an open breaker, over real HTTP: the requests it refuses cost no upstream
call, count against the key's rate limit like any other, and are logged as one record per key
per second that says how many it stands for, instead of a row each (issue 47: 32,611 rows and
59 MB of SQLite in 30 s); a request that reached the upstream is still a record of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.store.sqlite import Store, default_store_path

pytestmark = pytest.mark.integration

KEYS = {"alice": "alice-storm-key-" + "a" * 24, "bob": "bob-storm-key-" + "b" * 24}


@pytest.fixture
def server(sim, monkeypatch) -> Iterator[tuple[RouteServer, Router]]:
    sim.update_profile("dead-m", ttft_s=0.0, fault="500")
    for name, key in KEYS.items():
        monkeypatch.setenv(f"STORM_{name.upper()}", key)
    config = {"backends": {"dead": {"kind": "openai", "model": "dead-m", "base_url": sim.base_url, "max_retries": 0}},
              "routing": {"tiers": [{"name": "all", "backends": ["dead"]}],
                          "breaker": {"failures": 3, "cooldown_ms": 600_000, "probe_ms": 600_000}},
              "server": {"keys": {"alice": {"key": "${STORM_ALICE}"}, "bob": {"key": "${STORM_BOB}", "rpm": 20}}}}
    router = Router(load_config(config), source="server")
    with RouteServer(router, api_keys=KEYS) as srv:
        yield srv, router
    router.request_log.flush()


def _ask(http: httpx.Client, name: str) -> int:
    return http.post("/chat/completions", headers={"x-api-key": KEYS[name]},
                     json={"model": "auto", "messages": [{"role": "user", "content": f"storm from {name}"}]}).status_code


def test_refused_requests_are_one_record_per_key_per_second(server, sim):
    srv, router = server
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        assert [_ask(http, "alice") for _ in range(3)] == [503] * 3  # each reached the upstream; the breaker opens
        assert [_ask(http, "alice") for _ in range(150)] == [503] * 150  # refused by the breaker, no call
        assert [_ask(http, "bob") for _ in range(10)] == [503] * 10
    assert sim.stats("dead-m")["requests"] == 3
    assert router.request_log.flush()
    rows = Store(default_store_path()).recent(1000)
    called = [r for r in rows if "aggregate" not in r["decision"]]
    assert len(called) == 3 and all(r["key_name"] == "alice" and r["status"] == "error" for r in called)
    aggregates = [r for r in rows if "aggregate" in r["decision"]]
    requests = Counter()
    for row in aggregates:
        requests[row["key_name"]] += row["decision"]["aggregate"]["requests"]
        assert row["prompt"] == f"storm from {row['key_name']}" and row["error_type"] == "AllBackendsFailed"
    assert requests == {"alice": 150, "bob": 10}  # every refused request counted, none twice
    seconds = Counter((r["key_name"], r["decision"]["aggregate"]["second"]) for r in aggregates)
    assert max(seconds.values()) == 1, seconds  # one record per key per second
    assert len(aggregates) < 160


def test_a_keys_rate_limit_applies_to_requests_the_breaker_refuses(server, sim):
    srv, _ = server
    with httpx.Client(base_url=srv.base_url, timeout=30) as http:
        statuses = [_ask(http, "bob") for _ in range(25)]
        assert statuses == [503] * 20 + [429] * 5, statuses  # rpm 20: the breaker's refusals count too
        assert _ask(http, "alice") == 503  # alice's own limit is untouched by bob's storm
