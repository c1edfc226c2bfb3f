"""What the sessions benchmark's runs say: each session's outcome in a mode, a mode's figures,
its quality-against-cost curve over the boundary sweep, and which signals its sessions
escalated on (benchmarks/sessions.py prints them)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.session_client import STRONG, WEAK, Session, Signal

__all__ = ["LAST_TURN", "MODES", "ROUTED", "SESSIONS", "STRONGEST", "TRANSCRIPT", "WEAKEST", "Curve", "Detection",
           "ModeRun", "Outcome", "curves", "detection", "false_escalations", "hull", "precision", "quality_at"]

STRONGEST, WEAKEST, TRANSCRIPT, LAST_TURN, SESSIONS = (
    "always-strongest", "always-weakest", "per-call transcript", "per-call last turn", "sessions")
MODES = (STRONGEST, WEAKEST, TRANSCRIPT, LAST_TURN, SESSIONS)
ROUTED = (TRANSCRIPT, LAST_TURN, SESSIONS)


@dataclass
class Outcome:
    """One session in one mode: the tier that answered each call, and why (sessions only)."""

    session: Session
    tiers: list[str]
    whys: list[str]
    cost: float
    input_tokens: int
    cached_tokens: int
    signals: list[Signal]
    final: str

    @property
    def good(self) -> bool:
        return self.session.task.good(self.final)

    def moves(self) -> list[tuple[int, str, str]]:
        """(call, from tier, to tier) for each change of the answering tier."""
        return [(i, a, b) for i, (a, b) in enumerate(zip(self.tiers, self.tiers[1:]), start=1) if a != b]

    def escalated_after(self, call: int) -> bool:
        return any(i > call and b == STRONG for i, _, b in self.moves())


@dataclass
class ModeRun:
    mode: str
    boundary: float | None
    outcomes: list[Outcome]

    @property
    def quality(self) -> float:
        return statistics.fmean(o.good for o in self.outcomes)

    @property
    def cost(self) -> float:
        return sum(o.cost for o in self.outcomes)

    def per_session(self, what: str) -> float:
        moves = [m for o in self.outcomes for m in o.moves()]
        counted = {"moves": moves, "up": [m for m in moves if m[2] == STRONG],
                   "down": [m for m in moves if m[2] == WEAK]}[what]
        return len(counted) / len(self.outcomes)

    @property
    def cache_share(self) -> float:
        tokens = sum(o.input_tokens for o in self.outcomes)
        return sum(o.cached_tokens for o in self.outcomes) / tokens if tokens else 0.0


def hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The upper concave hull of (cost, quality) points: what mixing two boundaries reaches."""
    upper: list[tuple[float, float]] = []
    for p in sorted(set(points)):
        while len(upper) >= 2 and (upper[-1][0] - upper[-2][0]) * (p[1] - upper[-2][1]) >= \
                (p[0] - upper[-2][0]) * (upper[-1][1] - upper[-2][1]):
            upper.pop()
        upper.append(p)
    return upper


def quality_at(points: list[tuple[float, float]], cost: float) -> float:
    """The quality a hull reaches at `cost`: linear between its points, flat beyond its ends."""
    if cost <= points[0][0]:
        return points[0][1]
    for (c0, q0), (c1, q1) in zip(points, points[1:]):
        if cost <= c1:
            return q0 + (q1 - q0) * (cost - c0) / (c1 - c0)
    return max(q for _, q in points)


@dataclass
class Curve:
    mode: str
    runs: list[ModeRun]
    hull: list[tuple[float, float]]  # (cost as a share of always-strongest's, quality)

    def quality_at(self, share: float) -> float:
        return quality_at(self.hull, share)

    def apgr(self, weakest: float, strongest: float) -> float:
        steps = 200
        area = statistics.fmean(self.quality_at(i / steps) for i in range(steps + 1))
        return (area - weakest) / (strongest - weakest) if strongest != weakest else 0.5


def curves(runs: list[ModeRun], weakest: ModeRun, strongest: ModeRun) -> dict[str, Curve]:
    ends = [(weakest.cost / strongest.cost, weakest.quality), (1.0, strongest.quality)]
    out = {}
    for mode in ROUTED:
        mine = [r for r in runs if r.mode == mode]
        out[mode] = Curve(mode, mine, hull(ends + [(r.cost / strongest.cost, r.quality) for r in mine]))
    return out


# -- escalations ------------------------------------------------------------------------------------


@dataclass
class Detection:
    """Signals shown below the top tier, per kind (true or false), and how many the session
    escalated on; sessions that showed none, and how many moved up anyway; a line per move, and
    per signal that was not followed by one (the call that showed it)."""

    shown: Counter[str] = field(default_factory=Counter)
    escalated: Counter[str] = field(default_factory=Counter)
    quiet: int = 0
    quiet_moved: int = 0
    lines: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # a line per signal not followed by a move up

    def add(self, run: ModeRun, o: Outcome) -> None:
        if not o.signals:
            self.quiet += 1
            self.quiet_moved += bool(o.moves())
            self.lines += [_line(run, o, None, call) for call, _, _ in o.moves()]
        for signal in o.signals:
            if signal.tier == WEAK:
                self._signal(run, o, signal)

    def _signal(self, run: ModeRun, o: Outcome, signal: Signal) -> None:
        label = f"{signal.kind} ({'true' if signal.true else 'false'})"
        self.shown[label] += 1
        up = next((call for call, _, to in o.moves() if call > signal.at and to == STRONG), None)
        if up is not None:
            self.escalated[label] += 1
            self.lines.append(_line(run, o, signal, up))
        elif signal.at + 1 < len(o.tiers):
            self.missed.append(_line(run, o, signal, signal.at + 1))


def detection(runs: list[ModeRun]) -> Detection:
    """What the sessions of `runs` did after the signals they showed (and without any)."""
    found = Detection()
    for run in runs:
        for o in run.outcomes:
            found.add(run, o)
    return found


def _line(run: ModeRun, o: Outcome, signal: Signal | None, call: int) -> str:
    what = f"{signal.kind} ({'true' if signal.true else 'false'}) in answer {signal.at + 1}" if signal \
        else "no signal"
    return (f"  below={run.boundary:<5} {o.session.task.id:<20} {o.session.harness.name[:30]:<30} {what:<30} "
            f"{o.tiers[call - 1]}->{o.tiers[call]} on call {call + 1}: {o.whys[call][:90]!r}")


def precision(runs: list[ModeRun]) -> tuple[int, int]:
    """(escalations on evidence that followed a failure of the weaker model the session showed,
    all escalations on evidence). A move up after a false signal -- a flaky tool, a user who says
    "that's wrong" of a good answer -- is a false one, however faithfully the signal was read, as
    is one in a session whose outputs and turns up to it were all successful (what a detector of
    phrases does on a passing test run that names a file for errors, or on a poll)."""
    justified = total = 0
    for run in runs:
        for o in run.outcomes:
            for call, why in enumerate(o.whys):
                if why.startswith("escalated ("):
                    total += 1
                    justified += any(s.at < call and s.true for s in o.signals)
    return justified, total


def false_escalations(runs: list[ModeRun]) -> tuple[int, int]:
    """(escalations on evidence after a false signal only, escalations with no signal at all)."""
    after_false = unprompted = 0
    for run in runs:
        for o in run.outcomes:
            for call, why in enumerate(o.whys):
                if why.startswith("escalated (") and not any(s.at < call and s.true for s in o.signals):
                    if any(s.at < call for s in o.signals):
                        after_false += 1
                    else:
                        unprompted += 1
    return after_false, unprompted
