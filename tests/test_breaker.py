"""Circuit breaker transitions, driven by a hand-stepped clock."""

from __future__ import annotations

import pytest

from policies.breaker import BreakerBoard, BreakerSettings, CircuitBreaker

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(clock: Clock, failures: int = 3, cooldown_s: float = 10.0) -> CircuitBreaker:
    return CircuitBreaker(BreakerSettings(failures, cooldown_s), clock)


def test_opens_after_consecutive_failures_only():
    clock = Clock()
    b = breaker(clock)
    b.record_failure()
    b.record_failure()
    b.record_success()  # the run of failures is broken
    b.record_failure()
    b.record_failure()
    assert b.state == "closed" and b.allow()
    b.record_failure()
    assert b.state == "open"
    assert not b.allow() and not b.would_allow()


def test_half_open_after_cooldown_lets_one_probe_through():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 9.9
    assert b.state == "open"
    clock.now += 0.2
    assert b.state == "half-open"
    assert b.would_allow()
    assert b.allow()  # the probe
    assert not b.allow()  # only one at a time
    assert not b.would_allow()
    b.record_success()
    assert b.state == "closed" and b.allow() and b.allow()


def test_failed_probe_reopens_and_restarts_the_cooldown():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 10
    assert b.allow()
    b.record_failure()  # one failure is enough in half-open
    assert b.state == "open"
    clock.now += 9
    assert b.state == "open"  # cooldown counted from the failed probe
    clock.now += 1
    assert b.state == "half-open"


def test_release_frees_the_probe_slot_without_a_verdict():
    clock = Clock()
    b = breaker(clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 10
    assert b.allow()
    b.release()  # e.g. the probe was cancelled by a hedge
    assert b.state == "half-open"
    assert b.allow()


def test_board_keeps_one_breaker_per_backend():
    clock = Clock()
    board = BreakerBoard(clock, BreakerSettings(failure_threshold=1, cooldown_s=5))
    board["a"].record_failure()
    assert board["a"] is board["a"]
    assert board.states() == {"a": "open"}
    assert board["b"].state == "closed"


def test_the_board_hears_its_breakers_open_and_close_but_not_verdicts_from_elsewhere():
    clock = Clock()
    board = BreakerBoard(clock, BreakerSettings(failure_threshold=2, cooldown_s=10))
    heard: list[tuple[str, str]] = []
    board.on_change = lambda name, state: heard.append((name, state))
    board["a"].record_failure()
    board["a"].record_success()  # was closed: nothing to tell
    board["a"].record_failure()
    board["a"].record_failure()
    clock.now += 10
    assert board["a"].allow()
    board["a"].record_failure()  # the probe failed: open again
    clock.now += 10
    board["a"].record_success()
    board["b"].hold_open(3)
    board["b"].reset()
    assert heard == [("a", "open"), ("a", "open"), ("a", "closed")]


def test_hold_open_applies_a_verdict_from_elsewhere_without_shortening_its_own():
    clock = Clock()
    b = breaker(clock, failures=1, cooldown_s=10)
    b.hold_open(4)
    assert b.state == "open" and b.remaining_s() == 4
    clock.now += 4
    assert b.state == "half-open"
    b.record_failure()  # its own verdict: a whole cooldown
    b.hold_open(2)
    assert b.remaining_s() == 10
    b.hold_open(0)  # this process won the probe: half-open now, its slot free
    assert b.state == "half-open" and b.allow() and not b.allow()
    b.reset()
    assert b.state == "closed" and b.remaining_s() == 0


def test_last_resort_probes_come_no_further_apart_than_probe_max():
    """What a 503 tells a client to wait is the next probe (router/server/errors.py): it doubles
    from probe_initial_s after each failed probe, but stops at probe_max_s, so the wait stays
    short however long the upstream stays dead."""
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(3, cooldown_s=30.0, probe_initial_s=0.25, probe_max_s=0.5), clock)
    for _ in range(3):
        b.record_failure()
    spacings = []
    for _ in range(8):  # every probe fails
        spacings.append(b.probe_in())
        clock.now += b.probe_in() or 0.0
        assert b.claim_probe()
        b.record_failure()
    assert spacings == [0.25] + [0.5] * 7


def test_a_probe_pace_set_longer_than_the_cap_is_kept():
    clock = Clock()
    b = CircuitBreaker(BreakerSettings(1, cooldown_s=60.0, probe_initial_s=5.0, probe_max_s=0.5), clock)
    b.record_failure()
    assert b.probe_in() == 5.0
