"""Whose address a request comes from, over real HTTP: X-Forwarded-For is believed only from the
proxies the operator names (`server.forwarded_allow_ips`, none by default), so a client on the
same machine can neither dodge the wrong-key throttle by rotating the header nor aim it at an
address it names; behind a proxy that is named, each forwarded client is counted as itself."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backends.errors import ConfigError
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer

pytestmark = pytest.mark.integration

KEY = "the-tenants-own-key-" + "t" * 24


def _server(sim_url: str, monkeypatch: pytest.MonkeyPatch, proxies: list[str]) -> Iterator[RouteServer]:
    monkeypatch.setenv("FORWARDED_TENANT", KEY)
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)  # uvicorn's own fallback must not decide
    config: dict[str, Any] = {
        "backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim_url, "max_retries": 0}},
        "routing": {"tiers": [{"name": "all", "backends": ["small"]}]},
        "server": {"keys": {"tenant": {"key": "${FORWARDED_TENANT}"}}, "failed_key_rpm": 3,
                   "forwarded_allow_ips": proxies}}
    router = Router(load_config(config), source="server")
    with RouteServer(router, api_keys={"tenant": KEY}) as srv:
        srv.app.state.key_attempts.clock = lambda: 1000.0  # no wrong key is forgiven mid-test
        yield srv
    router.request_log.flush()


@pytest.fixture
def default_server(sim, monkeypatch) -> Iterator[RouteServer]:
    yield from _server(sim.base_url, monkeypatch, [])


@pytest.fixture
def behind_proxy(sim, monkeypatch) -> Iterator[RouteServer]:
    yield from _server(sim.base_url, monkeypatch, ["127.0.0.1"])


def _guess(server: RouteServer, n: int, forwarded_for: str) -> int:
    return httpx.get(f"{server.url}/v1/models", timeout=30,
                     headers={"x-api-key": f"guess-{n}-" + "g" * 24, "x-forwarded-for": forwarded_for}).status_code


def test_a_spoofed_forwarded_for_from_loopback_is_ignored_by_default(default_server):
    assert [_guess(default_server, n, f"198.51.100.{n}") for n in range(3)] == [401, 401, 401]
    assert _guess(default_server, 3, "198.51.100.3") == 429  # a fresh header is no fresh address


def test_a_named_proxy_forwards_each_clients_address(behind_proxy):
    assert [_guess(behind_proxy, n, "203.0.113.7") for n in range(3)] == [401, 401, 401]
    assert _guess(behind_proxy, 3, "203.0.113.7") == 429
    assert _guess(behind_proxy, 4, "203.0.113.8") == 401  # another client behind the same proxy: its own count
    assert httpx.get(f"{behind_proxy.url}/v1/models", headers={"x-api-key": KEY, "x-forwarded-for": "203.0.113.7"},
                     timeout=30).status_code == 200


def test_a_forwarded_for_from_a_proxy_not_named_is_ignored(sim, monkeypatch):
    for server in _server(sim.base_url, monkeypatch, ["10.9.8.7"]):
        assert [_guess(server, n, f"198.51.100.{n}") for n in range(4)] == [401, 401, 401, 429]


def test_a_proxy_that_is_not_an_address_is_refused_with_its_name():
    with pytest.raises(ConfigError, match="'my-proxy' is not an IP address or network"):
        load_config({"backends": {"small": {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"}},
                     "routing": {"tiers": [{"name": "all", "backends": ["small"]}]},
                     "server": {"forwarded_allow_ips": ["my-proxy"]}})
