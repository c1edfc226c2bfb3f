"""RedisLink against a real redis-server: calls reach Redis while it runs, fall back to the
caller's local answer (one warning, one counted outage) while it is stopped, and reach it again
once it is back."""

from __future__ import annotations

import logging

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
