"""RedisLink against a real redis-server: calls reach Redis while it runs, fall back to the
caller's local answer (one warning, one counted outage) while it is stopped, and reach it again
once it is back."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.config import StateConfig
from router.state.redis_link import RedisLink

pytestmark = pytest.mark.integration


async def test_calls_fall_back_while_redis_is_down_and_resume_when_it_returns(redis_server, caplog):
    clock = [0.0]
    # A generous timeout: a stopped server refuses at once, and a loaded machine is no outage.
    link = RedisLink(redis_server.url, prefix="t:", timeout_s=30.0, retry_s=5.0, clock=lambda: clock[0])

    assert await link.call(lambda r: r.incr(link.key("n")), fallback=-1) == 1
    redis_server.stop()
    with caplog.at_level(logging.WARNING, logger="router.state.redis_link"):
        assert await link.call(lambda r: r.incr(link.key("n")), fallback=-1) == -1
        assert await link.call(lambda r: r.incr(link.key("n")), fallback=-1) == -1  # not retried before retry_s
    assert not link.up and link.outages == 1
    assert len([r for r in caplog.records if "unavailable" in r.message]) == 1
    assert redis_server.url not in caplog.text

    redis_server.start()  # same port, empty: nothing was saved
    assert await link.call(lambda r: r.incr(link.key("n")), fallback=-1) == -1  # still waiting out retry_s
    clock[0] += 5.0
    assert await link.call(lambda r: r.incr(link.key("n")), fallback=-1) == 1
    assert link.up and link.outages == 1
    await link.aclose()


def test_a_redis_url_with_a_literal_password_is_refused():
    with pytest.raises(ValueError, match="ROUTE_REDIS_URL"):
        StateConfig(backend="redis", url="redis://:hunter2@cache:6379/0")
    with pytest.raises(ValueError, match="needs url"):
        StateConfig(backend="redis")
    assert StateConfig(backend="redis", url="${ROUTE_REDIS_URL}").url == "${ROUTE_REDIS_URL}"


def test_a_worker_starting_beside_a_healthy_redis_warns_of_nothing(redis_server, tmp_path):
    """What every `route serve` worker does at start-up, in a fresh process (so `redis` is not
    imported yet): importing the client and the first connection are no sign of Redis being down,
    however busy the machine is, so they are not held to the per-call timeout (here 20 ms)."""
    config = tmp_path / "redis.yaml"
    config.write_text("backends:\n  a: {kind: openai, model: m, base_url: 'http://127.0.0.1:9/v1'}\n"
                      "routing:\n  tiers: [{name: all, backends: [a]}]\n"
                      f"state: {{backend: redis, url: '{redis_server.url}', timeout_ms: 20}}\n")
    script = ("import sys\nfrom router.config_loader import load_config\nfrom router.serving import serving_router\n"
              "router = serving_router(load_config(sys.argv[1]), keep_log=False, api_key_env=None)\n"
              "print('outages', router.shared.status().outages, 'redis' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["outages", "0", "True"]  # it did reach Redis
    assert "unavailable" not in done.stderr, done.stderr
