"""The state the workers of `route serve --workers N` share without Redis (router/state/group.py):
rate limits drawn from one bucket by every worker, breaker verdicts that reach every worker with
one probe for the group, a replacement worker that joins where the dead one left off, and real
processes that take from one bucket at once and lose no update.

Two Routers (or limiters) on one table stand for two workers; their clocks are frozen where a
count must be exact; the processes share one frozen clock by value."""

from __future__ import annotations

import logging
import multiprocessing
from pathlib import Path

import pytest

from policies.breaker import BreakerBoard, BreakerSettings
from policies.rate_limit import RateLimits
from router.config_loader import load_config
from router.serving import serving_router
from router.state.group import GroupBreakers, GroupRateLimiter, group_slots, open_group
from router.state.group_table import GroupTable, GroupUnavailable
from router.state.rate_limits import Kind
from tests.group_hammer import hammer

pytestmark = pytest.mark.unit

NOW = 1_000.0
LIMITS: dict[tuple[Kind, str], RateLimits] = {("backend", "a"): RateLimits(rpm=3, tpm=1_000),
                                              ("key", "alice"): RateLimits(rpm=2)}
SLOTS = [("backend", "a"), ("key", "alice"), ("breaker", "a"), ("breaker", "b")]


def _limiter(path: Path, clock=lambda: NOW) -> GroupRateLimiter:
    return GroupRateLimiter(LIMITS, GroupTable(str(path), SLOTS), clock=clock)


async def test_two_workers_draw_from_one_bucket_and_a_replacement_joins_it(tmp_path):
    table = tmp_path / "group.table"
    one, two = _limiter(table), _limiter(table)
    assert [await w.take("a", 10) for w in (one, two, one)] == [None, None, None]
    refused = await two.take("a", 10)
    assert refused is not None and refused.what == "rpm 3" and refused.free_in_s == pytest.approx(20.0)
    assert one.peek("a", 10) is not None  # what the other took is seen before a decision too
    assert await one.take("alice", 0, kind="key") is None and await two.take("alice", 0, kind="key") is None
    assert await one.take("alice", 0, kind="key") is not None
    replacement = _limiter(table)  # a worker started after one died: the levels are where they were
    assert await replacement.take("a", 10) is not None


async def test_tpm_corrections_are_shared(tmp_path):
    table = tmp_path / "group.table"
    one, two = _limiter(table), _limiter(table)
    assert await one.take("a", 900) is None  # charged 900 at admission
    refused = await two.take("a", 200)
    assert refused is not None and refused.what == "tpm 1000"
    await one.settle("a", 900, 50)  # it used 50: 850 come back, for every worker
    assert await two.take("a", 200) is None


async def test_the_bucket_refills_with_the_shared_clock(tmp_path):
    now = [NOW]
    table = tmp_path / "group.table"
    one, two = _limiter(table, lambda: now[0]), _limiter(table, lambda: now[0])
    for _ in range(3):
        assert await one.take("a", 1) is None
    assert await two.take("a", 1) is not None
    now[0] += 20.0  # one request's worth at rpm 3
    assert await two.take("a", 1) is None and await one.take("a", 1) is not None


def test_a_table_laid_out_for_another_config_is_refused(tmp_path):
    path = str(tmp_path / "group.table")
    GroupTable(path, SLOTS).close()
    with pytest.raises(GroupUnavailable, match="another config"):
        GroupTable(path, SLOTS[:-1])
    with pytest.raises(GroupUnavailable, match="another config"):
        GroupTable(path, [("backend", "z"), *SLOTS[1:]])


def _config(tmp_path: Path, **backend) -> dict:
    spec = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0, **backend}
    return {"backends": {"a": spec, "b": dict(spec)}, "routing": {"tiers": [{"name": "all", "backends": ["a", "b"]}]},
            "log": {"enabled": False}}


def test_a_worker_that_cannot_join_runs_on_its_own_state_and_says_so(tmp_path, caplog):
    path = str(tmp_path / "group.table")
    GroupTable(path, [("backend", "other")]).close()
    with caplog.at_level(logging.WARNING):
        assert "another config" in open_group(load_config(_config(tmp_path, rpm=3)).config, path, latency=False)
        router = serving_router(load_config(_config(tmp_path, rpm=3)), keep_log=False, api_key_env=None, group=path)
    assert "runs on its own rate limits and breakers" in caplog.text
    assert not isinstance(router.rate_limits, GroupRateLimiter)


async def test_joined_routers_share_their_limits_through_the_call_path(tmp_path):
    path = str(tmp_path / "group.table")
    routers = [serving_router(load_config(_config(tmp_path, rpm=3)), keep_log=False, api_key_env=None, group=path)
               for _ in range(2)]
    for router in routers:
        assert isinstance(router.rate_limits, GroupRateLimiter)
        assert router.calls.limits is router.rate_limits
        assert router.shared.status().shared and router.shared.status().target == path
    assert group_slots(routers[0].config) == [("backend", "a"), ("backend", "b"), ("breaker", "a"), ("breaker", "b")]
    takes = [await routers[i % 2].rate_limits.take("a", 1) for i in range(4)]
    assert [t is None for t in takes] == [True, True, True, False]
    for router in routers:
        await router.aclose()


def _breakers(path: Path, clock) -> tuple[BreakerBoard, GroupBreakers]:
    board = BreakerBoard(clock, BreakerSettings(failure_threshold=2, cooldown_s=30.0))
    shared = GroupBreakers(GroupTable(str(path), SLOTS), board, clock=clock)
    board.on_change = shared.changed
    return board, shared


def test_a_breaker_one_worker_opened_holds_every_worker_and_one_probes_for_the_group(tmp_path):
    now = [NOW]
    clock = lambda: now[0]  # noqa: E731
    table = tmp_path / "group.table"
    (board_a, a), (board_b, b) = _breakers(table, clock), _breakers(table, clock)
    b.me = a.me + 1  # two workers of one process here: each needs its own id
    board_a["a"].record_failure()
    board_a["a"].record_failure()  # opens in worker A
    b.reconcile()
    assert board_b["a"].state == "open" and board_b["b"].state == "closed"
    now[0] += 31.0  # past the cooldown: half-open for the group, one worker probes
    b.reconcile()
    a.reconcile()
    assert board_b["a"].would_allow() and not board_a["a"].would_allow()  # B claimed the probe first
    assert board_b["a"].allow()
    board_b["a"].record_success()  # the probe came back: closed everywhere
    a.reconcile()
    assert board_a["a"].state == "closed" and board_a["a"].would_allow()


def test_an_unused_probe_claim_runs_out_and_another_worker_takes_it(tmp_path):
    now = [NOW]
    clock = lambda: now[0]  # noqa: E731
    table = tmp_path / "group.table"
    (board_a, a), (board_b, b) = _breakers(table, clock), _breakers(table, clock)
    b.me = a.me + 1
    board_a["b"].record_failure()
    board_a["b"].record_failure()
    now[0] += 31.0
    a.reconcile()  # A claims the probe ... and no request goes to b
    b.reconcile()
    assert not board_b["b"].would_allow()
    now[0] += 31.0  # the claim ran out
    b.reconcile()
    assert board_b["b"].would_allow()


RPM = 1_000


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.integration
def test_processes_taking_at_once_lose_no_update(tmp_path):
    path = str(tmp_path / "group.table")
    GroupTable(path, [("backend", "a")]).close()
    context = multiprocessing.get_context("spawn")
    queue, go = context.Queue(), context.Barrier(4 + 1)
    workers = [context.Process(target=hammer, args=(path, RPM, go, queue)) for _ in range(4)]
    for worker in workers:
        worker.start()
    go.wait(timeout=120)  # each tries for the whole limit, all at once
    admitted = [queue.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert sum(admitted) == RPM
