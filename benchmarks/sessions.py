"""Quality at cost of agent sessions, routed five ways through the real router, from labelled tasks.

    python benchmarks/sessions.py [--tasks-per-set 30] [--clients-per-task 1] [--seed 7] [--data DIR] [--every]

**Workload** (benchmarks/session_client.py states it in full). Tasks are prompts of the routing
sets (../shared/data/routing, or --data; llmrouter's uninformative tasks left out as the
scorer's training leaves them out), `--tasks-per-set` drawn from each set with a fixed seed.
Each task runs as one agent session in the harness of a recorded client (tests/data/clients:
Claude Code, Codex, OpenCode, aider, the SDKs; the clients taken in turn), every request parsed
by the server's own dialect: the task as the first user turn, tool round trips, short
follow-ups, a closing "thanks", and -- by the failure-signal model -- tool errors, the same turn
sent again, corrections, refusals, empty and cut-off answers. A weaker model's failure shows
with probability at most p (0, 0.3, 0.6); a good answer draws a false signal with probability 0.05.
Quality comes from the labels only: a task counts as answered well when the model that gave
its final answer is good enough for it (its label within 0.1 of the better model's).

**Backends**: two tiers, `weak` (a local model: free) and `strong` (priced like a frontier
model: $3 / $15 per million input / output tokens, cache reads at a tenth of input), both a
scripted kind answering through the base class's wire path (benchmarks/session_backend.py),
each with a provider's prompt cache (five minutes, on the script's clock; sessions are 15
minutes apart). Cost is the router's own `cost_usd` of each answer.

**Modes**, the same scorer and the same boundary in each: always-strongest, always-weakest,
per-call routing on the whole transcript (`router.acomplete(messages)`), per-call routing on
the last user turn only (the tier `router.decide` gives that turn alone, then that backend), and
sessions (`session=` the task's key, as `X-Session-Id` would give it).

**The curve**: the weak tier's `below:` boundary swept over quantiles of the scores the tasks
and their first requests get (and 1.0: only the strong tier's escalations); each mode's
quality against its cost. Modes are compared by *quality at equal cost*: each mode's best mix
of two of its boundaries (the upper hull of its points, with always-weakest and
always-strongest as ends every mode can take), read at the same cost; "APGR over cost" is the
area under that curve on costs from always-weakest's to always-strongest's, as a share of the
quality gap between them (0.5: no better than mixing the two at random).

**The signal probability.** The whole run is made with the weaker model's failure showing in
p = 0, 0.3 and 0.6 of its sessions (`P_CURVE`), the same tasks and dice otherwise; the tables
are p = 0.6's, the curve is printed last. Signals are worded as policies/sessions.py was not
written from (benchmarks/session_client.py, "Reworded signals"), and a tool's result is one the
client was recorded sending (tests/data/clients/outputs: its real failures, passing outputs
that name an error, polls of a running command, successful reads; benchmarks/session_outputs.py).
A client recorded polling polls: the very same call again, successful. A client with no
recorded results (the SDKs: the application writes them) shows a failed step as plain output,
so it never shows a tool-error signal; its sessions show the other kinds.

**Targets** (exit 1 on a miss): sessions beat both per-call modes on quality at equal cost
(APGR over cost, and quality at half of always-strongest's cost); at p = 0.6, sessions at half
of always-strongest's cost recover at least 80% of the quality gap between always-weakest and
always-strongest; at p = 0 sessions are not below either per-call mode; at most 1% of the
escalations on evidence follow no signal at all (a benign output, a poll, a success misread),
and sessions that showed none move up in at most 5% (over every boundary's sessions run); none
of the recorded passing tool results is read as a failure (benchmarks/session_outputs.py); no
session moves down; the session table stays bounded (100,000 sessions in a table of 10,000).
Escalation precision is printed with a false signal's move counted as false (the evidence was
real -- a recorded failing output while the model was fine, a good answer called wrong -- but
the move was not needed): it is what the workload's false signals cost, not a target.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.routing_data import routing_sets
from benchmarks.session_backend import KIND, Answer, ScriptedBackend
from benchmarks.session_client import P_SHOW, STRONG, WEAK, Session, SessionRun, Task, workload
from benchmarks.session_harness import harnesses
from benchmarks.session_outputs import detector_reading
from benchmarks.session_results import (
    LAST_TURN,
    ROUTED,
    SESSIONS,
    STRONGEST,
    TRANSCRIPT,
    WEAKEST,
    Curve,
    Detection,
    ModeRun,
    Outcome,
    curves,
    detection,
    false_escalations,
    precision,
)
from policies.complexity.training.leave_one_out import training_records
from router import Router
from router.sessions import SessionState, SessionTable

__all__ = ["boundaries", "config", "load_tasks", "main", "run_mode", "scores", "summary"]

PRICES = {WEAK: {"input": 0.0, "output": 0.0},
          STRONG: {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.0}}
STEP_S, GAP_S = 10.0, 900.0  # the script's clock: between calls of a session, and between sessions
BUDGETS = (0.25, 0.5, 0.75)  # shares of always-strongest's cost at which quality is read
TARGET_RECOVERED = 0.8
TARGET_FALSE_ESCALATION = 0.05
# Of the escalations on evidence, those after no signal at all: the router's own misreading. (One
# after a false signal read real evidence: a recorded failure of a step the model got right.)
TARGET_UNPROMPTED = 0.01
P_CURVE = (0.0, 0.3, P_SHOW)  # the share of a weaker model's failing sessions whose failure shows


def config(boundary: float) -> dict[str, Any]:
    # Kimi CLI and Mistral Vibe ask for about 250,000 tokens of answer: the scripted backends give any.
    backends = {name: {"kind": KIND, "model": f"m-{name}", "price": PRICES[name], "max_retries": 0,
                       "max_output_tokens": 1_000_000} for name in (WEAK, STRONG)}
    return {"backends": backends, "log": {"enabled": False},
            "routing": {"scorer": {"kind": "learned"},
                        "tiers": [{"name": WEAK, "below": boundary, "backends": [WEAK]},
                                  {"name": STRONG, "backends": [STRONG]}]}}


def load_tasks(directory: Path | None, per_set: int, seed: int) -> list[Task]:
    rng = random.Random(seed)
    tasks = []
    for name, records in sorted(routing_sets(directory).items()):
        kept = training_records(records)
        for r in rng.sample(kept, min(per_set, len(kept))):
            tasks.append(Task(str(r["id"]), name, str(r["prompt"]), float(r["local"]), float(r["hosted"])))
    return tasks


# -- one mode's run -------------------------------------------------------------------------------


class _Stage:
    """What the scripted backends answer: the session being run, on the script's clock."""

    def __init__(self) -> None:
        self.run: SessionRun | None = None
        self.clock = 0.0

    def __call__(self, backend: str, request: Any) -> tuple[Answer, float]:
        assert self.run is not None
        return self.run.answer(backend), self.clock


async def _route(router: Router, mode: str, messages: list[dict[str, Any]], options: Any, key: str) -> Any:
    if mode in (STRONGEST, WEAKEST):
        return await router.acomplete(messages, **options(STRONG if mode == STRONGEST else WEAK))
    if mode == LAST_TURN:
        last = next(m for m in reversed(messages) if m.get("role") == "user")
        return await router.acomplete(messages, **options(router.decide([last]).tier))  # tier name = backend name
    return await router.acomplete(messages, **options("auto", key if mode == SESSIONS else None))


async def _session(router: Router, stage: _Stage, mode: str, session: Session) -> Outcome:
    run = SessionRun(session)
    stage.run = run
    tiers, whys, cost, tokens, cached = [], [], 0.0, 0, 0
    going = True
    while going:
        call = session.harness.parse(run.request())
        result = await _route(router, mode, call.messages, call.options, session.key)
        completion = result.completion
        tiers.append(completion.backend)
        plan = result.decision.session
        whys.append(plan.why if plan is not None else "")
        cost += completion.cost_usd
        tokens += completion.usage.input_tokens
        cached += completion.usage.cache_read_tokens
        going = run.advance(completion.backend, completion)
        stage.clock += STEP_S
    stage.clock += GAP_S
    assert run.final is not None
    return Outcome(session, tiers, whys, cost, tokens, cached, list(run.signals), run.final)


async def run_mode(mode: str, boundary: float, sessions: Sequence[Session]) -> ModeRun:
    """Every session through a fresh Router (its own session table and provider caches)."""
    stage = _Stage()
    async with Router.from_config(config(boundary)) as router:
        for name in (WEAK, STRONG):
            backend = router.backend(name)
            assert isinstance(backend, ScriptedBackend)
            backend.script = stage
        outcomes = [await _session(router, stage, mode, s) for s in sessions]
    return ModeRun(mode, boundary if mode in ROUTED else None, outcomes)


def scores(sessions: Sequence[Session]) -> dict[str, tuple[float, float]]:
    """Session key -> the scores of its task alone and of its first request whole."""
    router = Router.from_config(config(0.5))
    out = {}
    for s in sessions:
        first = s.harness.parse(s.harness.first_turn(s.task.prompt))
        bare, whole = (router.decide(m).score for m in ([{"role": "user", "content": s.task.prompt}], first.messages))
        assert bare is not None and whole is not None
        out[s.key] = (bare.value, whole.value)
    return out


def boundaries(scored: dict[str, tuple[float, float]], count: int) -> list[float]:
    """Quantiles of the scores the tasks alone and their first requests whole get, and 1.0."""
    cuts = statistics.quantiles([v for pair in scored.values() for v in pair], n=count + 1)
    return sorted({round(min(1.0, max(0.001, c)), 3) for c in cuts} | {1.0})


# -- the table ----------------------------------------------------------------------------------------


def summary(runs: dict[str, ModeRun], sweep: list[ModeRun]) -> tuple[dict[str, Curve], float]:
    """The curves, and the boundary whose sessions run costs closest to half of always-strongest."""
    weakest, strongest = runs[WEAKEST], runs[STRONGEST]
    made = curves(sweep, weakest, strongest)
    sessions = [r for r in sweep if r.mode == SESSIONS]
    headline = min(sessions, key=lambda r: abs(r.cost / strongest.cost - 0.5)).boundary
    assert headline is not None
    return made, headline


def _mode_table(rows: list[ModeRun], strongest: ModeRun, made: dict[str, Curve], weakest: ModeRun) -> None:
    print(f"{'mode':<20} {'below':>6} {'quality':>8} {'APGR(curve)':>11} {'cost $':>9} {'x strongest':>12} "
          f"{'cache hits':>11} {'moves/s':>8} {'up/s':>6} {'down/s':>7}")
    for r in rows:
        apgr = f"{made[r.mode].apgr(weakest.quality, strongest.quality):.3f}" if r.mode in made else "-"
        below = f"{r.boundary:.3f}" if r.boundary is not None else "-"
        print(f"{r.mode:<20} {below:>6} {r.quality:>8.3f} {apgr:>11} {r.cost:>9.4f} "
              f"{r.cost / strongest.cost:>12.3f} {r.cache_share:>11.1%} {r.per_session('moves'):>8.2f} "
              f"{r.per_session('up'):>6.2f} {r.per_session('down'):>7.2f}")


def _curve_table(sweep: list[ModeRun], strongest: ModeRun, grid: list[float]) -> None:
    print("\nquality against cost (x always-strongest's) over the weak tier's boundary:")
    print(f"{'below':>6}  " + "  ".join(f"{m:>24}" for m in ROUTED))
    for b in grid:
        cells = []
        for mode in ROUTED:
            r = next(x for x in sweep if x.mode == mode and x.boundary == b)
            cells.append(f"{r.quality:>10.3f} @ {r.cost / strongest.cost:>6.3f}x   ")
        print(f"{b:>6.3f}  " + "  ".join(f"{c:>24}" for c in cells))


def _model_check(weakest: ModeRun) -> None:
    failing = [o for o in weakest.outcomes if not o.session.task.weak_good]
    fine = [o for o in weakest.outcomes if o.session.task.weak_good]
    shown = sum(any(s.true for s in o.signals) for o in failing) / max(1, len(failing))
    false = sum(bool(o.signals) for o in fine) / max(1, len(fine))
    print(f"failure-signal model, always-weakest: {len(failing)} tasks the weaker model fails, {shown:.1%} showed a "
          f"signal (60% drawn, rounded down); {len(fine)} it manages, {false:.1%} showed a false one (5% of all drawn)")


def _table_memory(n: int) -> float:
    """KiB a session table holds after `n` distinct sessions went through it."""
    tracemalloc.start()
    table = SessionTable(max_entries=10_000)
    for i in range(n):
        table.put(f"session-{i}", SessionState(tier=i % 2, backend=STRONG, calls=3, cached_tokens=4000))
    size = tracemalloc.get_traced_memory()[0] / 1024
    tracemalloc.stop()
    return size


def _targets(made: dict[str, Curve], detected: Detection, sweep: list[ModeRun], weakest: ModeRun,
             strongest: ModeRun) -> list[tuple[str, bool]]:
    qw, qs = weakest.quality, strongest.quality
    ours = made[SESSIONS]
    checks = []
    for mode in (TRANSCRIPT, LAST_TURN):
        other = made[mode]
        checks.append((f"sessions beat {mode} at equal cost: APGR over cost {ours.apgr(qw, qs):.3f} vs "
                       f"{other.apgr(qw, qs):.3f}, quality at 0.5x {ours.quality_at(0.5):.3f} vs "
                       f"{other.quality_at(0.5):.3f}",
                       ours.apgr(qw, qs) > other.apgr(qw, qs) and ours.quality_at(0.5) >= other.quality_at(0.5)))
    recovered = (ours.quality_at(0.5) - qw) / (qs - qw) if qs != qw else 0.0
    checks.append((f"sessions at 0.5x always-strongest's cost recover {recovered:.1%} of the quality gap "
                   f"(target >= {TARGET_RECOVERED:.0%})", recovered >= TARGET_RECOVERED))
    justified, total = precision([r for r in sweep if r.mode == SESSIONS])
    after_false, unprompted = false_escalations([r for r in sweep if r.mode == SESSIONS])
    share = justified / total if total else 1.0
    print(f"\nescalation precision: {justified}/{total} = {share:.1%} of escalations on evidence followed a failure of "
          f"the weaker model; the false ones: {after_false} after a false signal (a recorded failing output while the "
          f"model was fine, a good answer called wrong: real evidence, wrongly), {unprompted} after none")
    unprompted_share = unprompted / total if total else 0.0
    checks.append((f"escalations on no evidence (a benign output, a poll, a success): {unprompted}/{total} = "
                   f"{unprompted_share:.1%} (target <= {TARGET_UNPROMPTED:.0%}); with false signals counted as false, "
                   f"precision {share:.1%}", unprompted_share <= TARGET_UNPROMPTED))
    quiet = detected.quiet_moved / detected.quiet if detected.quiet else 0.0
    checks.append((f"sessions that showed no signal moved up: {detected.quiet_moved}/{detected.quiet} = {quiet:.1%} "
                   f"(target <= {TARGET_FALSE_ESCALATION:.0%})", quiet <= TARGET_FALSE_ESCALATION))
    caught, failures, false, passing = detector_reading()
    checks.append((f"recorded tool results (tests/data/clients/outputs): {caught}/{failures} real failures read as "
                   f"failed, {false}/{passing} passing ones (a benign output, a poll, a success) read as failed "
                   "(target 0)", false == 0))
    down = sum(r.per_session("down") * len(r.outcomes) for r in sweep if r.mode == SESSIONS)
    checks.append((f"sessions moved down {down:.0f} times (target 0)", down == 0))
    small, large = statistics.mean(_table_memory(10_000) for _ in range(2)), _table_memory(100_000)
    checks.append((f"session table: {small:.0f} KiB after 10,000 sessions, {large:.0f} KiB after 100,000 (bounded "
                   f"at 10,000 entries: x{large / small:.2f}, target <= 1.5)", large / small <= 1.5))
    return checks


def _of(run: ModeRun, harness: str) -> list[Outcome]:
    return [o for o in run.outcomes if o.session.harness.name == harness]


def _cell(outcomes: list[Outcome]) -> str:
    return f"{statistics.fmean(o.tiers[0] == STRONG for o in outcomes):>4.0%} {statistics.fmean(o.good for o in outcomes):>5.2f}"


def _by_client(sweep: list[ModeRun], headline: float, scored: dict[str, tuple[float, float]]) -> None:
    """Per client, at the headline boundary: how often a session's first call went to the strong
    tier, against how often its task alone scores there (what a harness-blind score would do)."""
    runs = [r for r in sweep if r.boundary == headline]
    print(f"\nby client at below={headline}: share of first calls on the strong tier, and quality")
    print(f"{'client harness':<52} {'n':>3} {'task alone':>10} " + " ".join(f"{r.mode[-10:]:>10}" for r in runs))
    for name in sorted({o.session.harness.name for o in runs[0].outcomes}):
        mine = [_of(r, name) for r in runs]
        alone = statistics.fmean(scored[o.session.key][0] >= headline for o in mine[0])
        print(f"{name:<52} {len(mine[0]):>3} {alone:>10.0%} " + " ".join(f"{_cell(m):>10}" for m in mine))


def _header(sessions: list[Session], weakest: ModeRun, strongest: ModeRun) -> None:
    calls = sum(len(o.tiers) for o in strongest.outcomes)
    clients = len({s.harness.name for s in sessions})
    print(f"{len(sessions)} sessions ({calls} calls in always-strongest) in {clients} client harnesses; "
          f"weak answer good enough on {statistics.fmean(s.task.weak_good for s in sessions):.1%} of tasks, strong "
          f"on {statistics.fmean(s.task.strong_good for s in sessions):.1%}")
    _model_check(weakest)


def _equal_cost_table(made: dict[str, Curve], weakest: ModeRun, strongest: ModeRun) -> None:
    print("\nquality at equal cost (each mode's upper hull, read at a share of always-strongest's cost):")
    print(f"{'mode':<20} " + " ".join(f"{f'{b:.2f}x':>7}" for b in BUDGETS) + f" {'APGR/cost':>10}")
    for mode, curve in made.items():
        print(f"{mode:<20} " + " ".join(f"{curve.quality_at(b):>7.3f}" for b in BUDGETS)
              + f" {curve.apgr(weakest.quality, strongest.quality):>10.3f}")


def _escalations(detected: Detection, every: bool) -> None:
    print("\nescalations of the sessions runs (every boundary), by the signal shown below the top tier:")
    for label in sorted(detected.shown):
        print(f"  {label:<24} shown {detected.shown[label]:>4}  escalated {detected.escalated[label]:>4}")
    print(f"  {'no signal':<24} shown {detected.quiet:>4}  moved up  {detected.quiet_moved:>4}")
    for title, lines in (("moves of the sessions runs", detected.lines),
                         ("signals not followed by a move up", detected.missed)):
        print(f"{title} ({len(lines)}{'' if every else ', the first 12; --every prints all'}):")
        for line in lines if every else lines[:12]:
            print(line)


def _report(sessions: list[Session], runs: dict[str, ModeRun], sweep: list[ModeRun], grid: list[float],
            scored: dict[str, tuple[float, float]], every: bool) -> list[tuple[str, bool]]:
    weakest, strongest = runs[WEAKEST], runs[STRONGEST]
    made, headline = summary(runs, sweep)
    _header(sessions, weakest, strongest)
    print(f"\nper mode at the boundary where sessions cost closest to 0.5x always-strongest (below={headline}):")
    _mode_table([strongest, weakest, *[r for r in sweep if r.boundary == headline]], strongest, made, weakest)
    _by_client(sweep, headline, scored)
    _curve_table(sweep, strongest, grid)
    _equal_cost_table(made, weakest, strongest)
    detected = detection([r for r in sweep if r.mode == SESSIONS])
    _escalations(detected, every)
    return _targets(made, detected, sweep, weakest, strongest)


@dataclass
class _Point:
    """One point of the signal-probability curve: every mode run on the same tasks."""

    p: float
    runs: dict[str, ModeRun]
    sweep: list[ModeRun]

    def curves(self) -> dict[str, Curve]:
        return curves(self.sweep, self.runs[WEAKEST], self.runs[STRONGEST])

    def recovered(self) -> float:
        qw, qs = self.runs[WEAKEST].quality, self.runs[STRONGEST].quality
        return (self.curves()[SESSIONS].quality_at(0.5) - qw) / (qs - qw) if qs != qw else 0.0


async def _point(p: float, tasks: list[Task], seed: int, clients: int, grid: list[float] | None,
                 quantiles: int) -> tuple[_Point, list[Session], dict[str, tuple[float, float]], list[float]]:
    sessions = workload(tasks, harnesses(), seed, clients, p_show=p)
    scored = scores(sessions)
    grid = grid or boundaries(scored, quantiles)
    runs = {mode: await run_mode(mode, 0.5, sessions) for mode in (STRONGEST, WEAKEST)}
    sweep = [await run_mode(mode, b, sessions) for b in grid for mode in ROUTED]
    return _Point(p, runs, sweep), sessions, scored, grid


def _curve(points: list[_Point]) -> list[tuple[str, bool]]:
    """The curve over the signal probability, and its targets: the gap recovered at 0.5x with
    signals shown as often as the model says (reworded), and never below per-call at p = 0."""
    print("\nthe curve over the signal probability (reworded signals; quality at 0.5x always-strongest's cost, "
          "APGR over cost, escalation precision):")
    print(f"{'p':>4}  {'recovered':>9}  " + "  ".join(f"{m:>26}" for m in ROUTED) + f"  {'precision':>10}")
    for point in points:
        made, (qw, qs) = point.curves(), (point.runs[WEAKEST].quality, point.runs[STRONGEST].quality)
        justified, total = precision([r for r in point.sweep if r.mode == SESSIONS])
        cells = "  ".join(f"{made[m].quality_at(0.5):>12.3f} / {made[m].apgr(qw, qs):>11.3f}" for m in ROUTED)
        print(f"{point.p:>4.1f}  {point.recovered():>9.1%}  {cells}  {justified:>4}/{total:<5}")
    checks = []
    last = points[-1]
    checks.append((f"at p = {last.p}, sessions at 0.5x always-strongest's cost recover {last.recovered():.1%} of the "
                   f"quality gap with reworded signals (target >= {TARGET_RECOVERED:.0%})",
                   last.recovered() >= TARGET_RECOVERED))
    zero = next(point for point in points if point.p == 0.0)
    made, (qw, qs) = zero.curves(), (zero.runs[WEAKEST].quality, zero.runs[STRONGEST].quality)
    ours = made[SESSIONS]
    for mode in (TRANSCRIPT, LAST_TURN):
        other = made[mode]
        checks.append((f"at p = 0 (no failure shows), sessions are not below {mode}: quality at 0.5x "
                       f"{ours.quality_at(0.5):.3f} vs {other.quality_at(0.5):.3f}, APGR over cost "
                       f"{ours.apgr(qw, qs):.3f} vs {other.apgr(qw, qs):.3f}",
                       ours.quality_at(0.5) >= other.quality_at(0.5) - 1e-9 and ours.apgr(qw, qs) >= other.apgr(qw, qs) - 1e-9))
    return checks


async def main(directory: Path | None, per_set: int, seed: int, quantiles: int, every: bool,
               clients: int = 1) -> int:
    tasks = load_tasks(directory, per_set, seed)
    points, grid = [], None
    for p in P_CURVE:
        point, sessions, scored, grid = await _point(p, tasks, seed, clients, grid, quantiles)
        points.append(point)
    print(f"{per_set} tasks per routing set (seed {seed}), each in {clients} client harness(es), boundaries {grid}; "
          f"the tables at p = {P_CURVE[-1]}")
    last = points[-1]
    checks = _report(sessions, last.runs, last.sweep, grid, scored, every)
    checks += _curve(points)
    print()
    for text, ok in checks:
        print(("ok      " if ok else "MISSED  ") + text)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="a directory of routing sets (*.jsonl)")
    parser.add_argument("--tasks-per-set", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--clients-per-task", type=int, default=1, help="each task in this many client harnesses")
    parser.add_argument("--quantiles", type=int, default=8, help="boundaries swept: this many score quantiles, and 1.0")
    parser.add_argument("--every", action="store_true", help="print every escalation, not a sample")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.data, args.tasks_per_set, args.seed, args.quantiles, args.every, args.clients_per_task)))
