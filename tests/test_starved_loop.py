"""A busy box runs the event loop late: an answer that arrived by the time the deadline's timer
runs is taken, not cut (issue 26: a router must not lose requests a peer answers because its own
box is busy).

The loop is starved on purpose: a callback blocks it across the deadline, and the answer
arrives during the block, so the loop then finds both due in the same turn. Before the fix the
timer went first and the answer was thrown away; on every path that holds a deadline (the
attempt's in the caller's task, a wire call in a task of its own, a hedged race) it is now
taken. An answer that is not there yet is still cut at the deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from backends import register_kind, registry
from backends.assembly import Delta
from backends.base import Backend
from backends.deadline import Deadline, Watchdog
from backends.errors import AllBackendsFailed, BackendTimeout
from backends.types import Request
from router import Router
from router.config_loader import parse_config

pytestmark = pytest.mark.unit

DEADLINE_S = 0.2
STALL_FROM_S, STALL_S = 0.05, 0.4  # the loop is blocked from 0.05 s to 0.45 s: across the deadline
ARRIVES_S = 0.1  # during the block


class ArrivesWhenToldBackend(Backend):
    """A model whose answer arrives when the test sets `arrived` (of the running test)."""

    kind = "arrives-test"
    wire_task = False
    arrived: asyncio.Event

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        await type(self).arrived.wait()
        yield Delta(text="the answer")


class ArrivesInItsOwnTaskBackend(ArrivesWhenToldBackend):
    kind = "arrives-task-test"
    wire_task = True


def _starve_the_loop_while_the_answer_arrives() -> asyncio.Event:
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()
    loop.call_later(STALL_FROM_S, time.sleep, STALL_S)
    loop.call_later(ARRIVES_S, arrived.set)
    return arrived


@pytest.fixture
def kinds(monkeypatch):
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))  # registered for this test only
    register_kind("arrives-test", ArrivesWhenToldBackend)
    register_kind("arrives-task-test", ArrivesInItsOwnTaskBackend)


def _router(kind: str, names: list[str], *, hedge: bool) -> Router:
    backends = "\n".join(f"  {name}: {{kind: {kind}, model: m-{name}, max_retries: 0, "
                         "latency: {ttft_ms: 20, tokens_per_s: 1000}}" for name in names)
    text = (f"backends:\n{backends}\nrouting:\n  deadline_ms: {int(DEADLINE_S * 1000)}\n  hedge: {str(hedge).lower()}\n"
            f"  tiers: [{{name: all, backends: [{', '.join(names)}]}}]\n")
    return Router(parse_config(text, "starved.yaml"), log=False)


async def test_the_watchdog_takes_an_answer_that_arrived_with_the_deadline():
    arrived = _starve_the_loop_while_the_answer_arrives()

    async def answer() -> AsyncIterator[str]:
        await arrived.wait()
        yield "the answer"

    watchdog = Watchdog(Deadline(DEADLINE_S))
    try:
        assert await watchdog.next(answer()) == "the answer"
    finally:
        watchdog.stop()


async def test_the_watchdog_still_cuts_an_answer_that_is_not_there():
    never = asyncio.Event()

    async def answer() -> AsyncIterator[str]:
        await never.wait()
        yield "too late"

    watchdog = Watchdog(Deadline(DEADLINE_S))
    with pytest.raises(TimeoutError):
        await watchdog.next(answer())


@pytest.mark.parametrize("kind", ["arrives-test", "arrives-task-test"])
async def test_a_routed_call_takes_an_answer_that_arrived_with_the_deadline(kinds, kind):
    ArrivesWhenToldBackend.arrived = _starve_the_loop_while_the_answer_arrives()
    router = _router(kind, ["only"], hedge=False)
    result = await router.acomplete("hello")
    assert result.text == "the answer" and result.backend == "only"


async def test_a_hedged_race_takes_an_answer_that_arrived_with_the_deadline(kinds):
    ArrivesWhenToldBackend.arrived = _starve_the_loop_while_the_answer_arrives()
    router = _router("arrives-test", ["first", "second"], hedge=True)
    result = await router.acomplete("hello")
    assert result.text == "the answer"


async def test_a_routed_call_is_still_cut_when_nothing_arrived(kinds):
    ArrivesWhenToldBackend.arrived = asyncio.Event()  # never set
    router = _router("arrives-test", ["only"], hedge=False)
    with pytest.raises(AllBackendsFailed) as failed:
        await router.acomplete("hello")
    assert [type(e) for e in failed.value.exceptions] == [BackendTimeout]
    assert "deadline" in str(failed.value.exceptions[0])
