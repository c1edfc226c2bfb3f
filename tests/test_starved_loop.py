"""A busy box runs the event loop late: an answer that arrived by the time the deadline's timer
runs is taken, not cut (issue 26: a router must not lose requests a peer answers because its own
box is busy).

The loop is starved on purpose: once the call is under way, a callback blocks the loop across
the deadline, and the answer is due during the block, before the deadline, so the loop then
finds both due in the same turn. Both are timed from the call's own deadline, so how long the
box takes to get there does not matter. Before the fix the timer went first and the answer was
thrown away; on every path that holds a deadline (the attempt's in the caller's task, a wire
call in a task of its own, a hedged race) it is now taken. An answer that is not there yet is
still cut at the deadline.
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

DEADLINE_S = 1.0
PAST_S = 0.3  # the block ends this long after the deadline


def _starve_across(deadline: Deadline, arrived: asyncio.Event) -> None:
    """Block the loop from now until PAST_S after `deadline`; the answer is due halfway to it."""
    remaining = deadline.remaining()
    assert remaining is not None and remaining > 0
    loop = asyncio.get_running_loop()
    loop.call_soon(time.sleep, remaining + PAST_S)
    loop.call_later(remaining / 2, arrived.set)


class ArrivesDuringAStallBackend(Backend):
    """A model whose answer arrives while the loop is blocked across the call's deadline (the
    first call of a test; later ones, a hedge's, wait for the same answer)."""

    kind = "arrives-test"
    wire_task = False
    arrived: asyncio.Event
    starve = True

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        cls = ArrivesDuringAStallBackend
        if cls.starve:
            cls.starve = False
            _starve_across(deadline, cls.arrived)
        await cls.arrived.wait()
        yield Delta(text="the answer")


class ArrivesInItsOwnTaskBackend(ArrivesDuringAStallBackend):
    kind = "arrives-task-test"
    wire_task = True


@pytest.fixture
def kinds(monkeypatch):
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))  # registered for this test only
    register_kind("arrives-test", ArrivesDuringAStallBackend)
    register_kind("arrives-task-test", ArrivesInItsOwnTaskBackend)
    monkeypatch.setattr(ArrivesDuringAStallBackend, "arrived", asyncio.Event(), raising=False)
    monkeypatch.setattr(ArrivesDuringAStallBackend, "starve", True)


def _router(kind: str, names: list[str], *, hedge: bool) -> Router:
    backends = "\n".join(f"  {name}: {{kind: {kind}, model: m-{name}, max_retries: 0, "
                         "latency: {ttft_ms: 20, tokens_per_s: 1000}}" for name in names)
    text = (f"backends:\n{backends}\nrouting:\n  deadline_ms: {int(DEADLINE_S * 1000)}\n  hedge: {str(hedge).lower()}\n"
            f"  tiers: [{{name: all, backends: [{', '.join(names)}]}}]\n")
    return Router(parse_config(text, "starved.yaml"), log=False)


async def test_the_watchdog_takes_an_answer_that_arrived_with_the_deadline():
    arrived = asyncio.Event()

    async def answer() -> AsyncIterator[str]:
        await arrived.wait()
        yield "the answer"

    deadline = Deadline(DEADLINE_S)
    watchdog = Watchdog(deadline)
    _starve_across(deadline, arrived)
    try:
        assert await watchdog.next(answer()) == "the answer"
    finally:
        watchdog.stop()


async def test_the_watchdog_still_cuts_an_answer_that_is_not_there():
    never = asyncio.Event()

    async def answer() -> AsyncIterator[str]:
        await never.wait()
        yield "too late"

    watchdog = Watchdog(Deadline(0.2))
    with pytest.raises(TimeoutError):
        await watchdog.next(answer())


@pytest.mark.parametrize("kind", ["arrives-test", "arrives-task-test"])
async def test_a_routed_call_takes_an_answer_that_arrived_with_the_deadline(kinds, kind):
    router = _router(kind, ["only"], hedge=False)
    result = await router.acomplete("hello")
    assert result.text == "the answer" and result.backend == "only"


async def test_a_hedged_race_takes_an_answer_that_arrived_with_the_deadline(kinds):
    router = _router("arrives-test", ["first", "second"], hedge=True)
    result = await router.acomplete("hello")
    assert result.text == "the answer"


async def test_a_routed_call_is_still_cut_when_nothing_arrived(kinds):
    ArrivesDuringAStallBackend.starve = False  # no block, and the answer never comes
    router = _router("arrives-test", ["only"], hedge=False)
    with pytest.raises(AllBackendsFailed) as failed:
        await router.acomplete("hello")
    assert [type(e) for e in failed.value.exceptions] == [BackendTimeout]
    assert "deadline" in str(failed.value.exceptions[0])
