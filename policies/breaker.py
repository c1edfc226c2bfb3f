"""Circuit breakers: stop sending requests to a backend that keeps failing, then probe it.

    closed ──(failure_threshold consecutive failures)──> open
    open ──(cooldown_s passed)──> half-open: one probe request at a time is let through
    half-open ──probe succeeds──> closed;  ──probe fails──> open again, cooldown restarts

The cooldown is how long an open backend is passed over while others can answer. A request
with nothing else left may still probe it sooner, as a last resort (`probe_in`, `claim_probe`):
after `probe_initial_s`, doubling with each failure in a row up to `probe_max_s` (never later
than the cooldown). So a client retrying against a dead upstream costs at most one upstream call
per request, at a pace the router chooses, and is never kept waiting out a cooldown nobody else
needed. The pace is what a 503 tells clients to wait (Retry-After), so it backs off as a client
would going direct: clients that honour it then spread their retries over an outage as long as
the one they survive direct (Claude Code's ten retries over a minute and more, not ten seconds),
and a dead upstream sees one probe per wait, not a storm (benchmarks/retries.py).

The clock is injected (seconds, monotonic) so tests step time by hand; no threads, no I/O.
A board's `on_change(name, state)` hears of every transition this process's own calls cause
(to "open" or to "closed"), so a caller can share verdicts beyond the process; `hold_open` and
`reset` apply a verdict reached elsewhere and tell no one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["BreakerBoard", "BreakerListener", "BreakerSettings", "CircuitBreaker", "State"]

State = Literal["closed", "open", "half-open"]
BreakerListener = Callable[[str, State], None]


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    failure_threshold: int = 3
    cooldown_s: float = 30.0
    probe_initial_s: float = 1.0  # the first last-resort probe's wait after the breaker opens
    probe_max_s: float = 16.0  # the longest wait between last-resort probes


class CircuitBreaker:
    """One backend's breaker. `allow()` before a call; `record_success/failure` after it."""

    def __init__(self, settings: BreakerSettings, clock: Callable[[], float], *, name: str = "",
                 on_change: BreakerListener | None = None):
        self.settings = settings
        self.name = name
        self._clock = clock
        self._on_change = on_change
        self._failures = 0  # consecutive
        self._opened_at: float | None = None
        self._probing = False  # a half-open probe is in flight
        self.answered = False  # it has answered a call (here, or by a verdict reached elsewhere)

    @property
    def state(self) -> State:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.settings.cooldown_s:
            return "half-open"
        return "open"

    def allow(self) -> bool:
        """May a request go to this backend now? In half-open, claims the single probe slot."""
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._probing:
            self._probing = True
            return True
        return False

    def cooldown_left(self) -> float | None:
        """Seconds until an open breaker lets its probe through; None unless it is open."""
        if self.state != "open" or self._opened_at is None:
            return None
        return max(0.0, self._opened_at + self.settings.cooldown_s - self._clock())

    @property
    def failing(self) -> bool:
        """Whether its last call failed (or it is held open): a retry now is no blip's."""
        return self._failures > 0 or self._opened_at is not None

    def probe_in(self) -> float | None:
        """Seconds until a last-resort call may go to it (0: now; always 0 while closed); None
        while a probe is in flight, whose outcome decides."""
        if self._opened_at is None:
            return 0.0
        if self._probing:
            return None
        return max(0.0, self._opened_at + self._probe_spacing() - self._clock())

    def _probe_spacing(self) -> float:
        settings = self.settings
        doublings = min(max(0, self._failures - settings.failure_threshold), 30)  # 2**30 s: past any cooldown
        return min(settings.probe_initial_s * 2 ** doublings, max(settings.probe_initial_s, settings.probe_max_s),
                   settings.cooldown_s)

    def claim_probe(self) -> bool:
        """Claim the probe slot for a last-resort call, when one is due (`probe_in` is 0)."""
        if self.probe_in() != 0.0:
            return False
        if self._opened_at is not None:
            self._probing = True
        return True

    def would_allow(self) -> bool:
        """`allow()` without claiming the probe slot: for planning, not calling."""
        state = self.state
        return state == "closed" or (state == "half-open" and not self._probing)

    def record_success(self) -> None:
        was_open = self._opened_at is not None
        self.answered = True
        self._failures = 0
        self._opened_at = None
        self._probing = False
        if was_open and self._on_change is not None:
            self._on_change(self.name, "closed")

    def record_failure(self) -> None:
        self._failures += 1
        opens = self._probing or self._failures >= self.settings.failure_threshold
        if opens:
            self._opened_at = self._clock()  # (re)open: the cooldown starts now
        self._probing = False
        if opens and self._on_change is not None:
            self._on_change(self.name, "open")

    def remaining_s(self) -> float:
        """Seconds until an open breaker turns half-open (0 when it is not open)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self.settings.cooldown_s - self._clock())

    def hold_open(self, seconds: float) -> None:
        """Open for at least `seconds` more, by a verdict reached elsewhere (0: half-open now,
        its probe slot free). Never shortens a longer open period of this breaker's own."""
        if seconds > 0 and self.remaining_s() >= seconds:
            return
        self._opened_at = self._clock() - self.settings.cooldown_s + max(0.0, seconds)
        self._probing = False

    def reset(self) -> None:
        """Closed, by a verdict reached elsewhere (another replica's probe succeeded)."""
        self.answered = True
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def release(self) -> None:
        """A call ended with neither verdict (cancelled): free the probe slot for someone else."""
        self._probing = False


class BreakerBoard:
    """A breaker per backend name, created on first use."""

    def __init__(self, clock: Callable[[], float], settings: BreakerSettings | None = None):
        self.settings = settings or BreakerSettings()
        self._clock = clock  # seconds, monotonic; the router passes time.monotonic
        self._breakers: dict[str, CircuitBreaker] = {}
        self.on_change: BreakerListener | None = None  # hears every breaker's own transitions

    def __getitem__(self, name: str) -> CircuitBreaker:
        breaker = self._breakers.get(name)
        if breaker is None:
            breaker = self._breakers[name] = CircuitBreaker(self.settings, self._clock, name=name,
                                                            on_change=self._changed)
        return breaker

    def _changed(self, name: str, state: State) -> None:
        if self.on_change is not None:
            self.on_change(name, state)

    def states(self) -> dict[str, State]:
        return {name: b.state for name, b in self._breakers.items()}
