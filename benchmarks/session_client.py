"""The sessions benchmark's workload: labelled tasks, run by a recorded client as agent sessions,
and the failure-signal model that says when a session shows that its model is failing.

**Tasks** are prompts of the routing sets (../shared/data/routing): `local` and `hosted` are the
quality of a weaker and a stronger model on it. A model's answer is *good enough* when its label
is within `TOLERANCE` of the better of the two (`local >= hosted - 0.1` for the weaker model; with
the 0/1 labels of most sets: it answered right, or neither did).

**A session** is one task in one client's harness (benchmarks/session_harness.py): the task as
the first user turn, 1-3 tool round trips (clients with tools), a text answer; half the sessions
then get a short follow-up ("ok, continue") and more tool rounds and an answer; 30% end with a
closing turn ("thanks"). Its *final answer* is the last one before the closing turn: the task
counts as answered well when the model that gave it is good enough for the task.

**The failure-signal model.** Each session has, once and for every mode alike, a signal kind
(the kinds in turn), a call `arm_at` from which its failure may show (at random), and two coins:
`shows`, true for `P_SHOW` = 60% (rounded down) of the sessions whose task the weaker model
fails, drawn at random, and `false_signal`, true for `P_FALSE` = 5% of all sessions. At the
first call from `arm_at` on that the weaker model answers on a task it is not good enough for,
its answer fails visibly if `shows`, else the failure stays hidden for the whole session: so a
weaker model's failure shows in at most 60% of its sessions, and escalating on signals is no
oracle. At call `arm_at` answered by a model
that is good enough (the stronger one, or the weaker on a task it manages), the same kind of
signal shows falsely if `false_signal`: a flaky tool, a user who says "that's wrong" anyway. At
most one signal per session. The router sees a signal only as a client would show it, in the
next request, never through a label:

- `tool_errors`: two tool results in a row fail, in the client's own shape (`is_error`, a
  non-zero exit code, `success: false`; nothing but the output where the client reports no
  status), the second call the first again (a stuck model repeats itself); a stronger model
  answering the second call gets past it;
- `correction`: the user says the answer was wrong;
- `retype`: the user asks for the task again, around its words; `repeat`: the client sends the
  same request again;
- `refusal`: the answer is a refusal (`finish_reason` content_filter), then the user insists;
- `empty`: the answer is empty, and the client sends the request again;
- `truncated`: the answer is cut off (`finish_reason` length), and the user says "continue".

A failing answer takes no step of the task: the session goes on with the same step next call.

**Reworded signals.** What the user says is worded as policies/sessions.py was not written from:
no correction opens with its phrases (`CORRECTIONS`, `RETYPES`). What a tool returns is what the
client was recorded sending (benchmarks/session_outputs.py): a failed step one of its recorded
failures, a passing one one of its recorded passing results -- a benign output that prints
"exited with code 1" or names a test for errors, a successful read, a poll of a running command
-- so that a detector of phrases, or of a call repeated while polling, would move on them. Only a
client with no recordings (the SDKs) gets a result with `ERROR_OUTPUTS` or `OK_OUTPUTS` written
into its recorded one (as written by no rule's author: no traceback, no `FAILED` line, "error" in
passing file and test names), and shows no tool-error signal.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backends.types import Completion
from benchmarks.session_backend import Answer
from benchmarks.session_harness import Harness

__all__ = ["KINDS", "P_FALSE", "P_POLL", "P_SHOW", "STRONG", "TOLERANCE", "WEAK", "Plan", "Session", "SessionRun", "Signal",
           "Task", "draw_plan", "workload"]

WEAK, STRONG = "weak", "strong"  # the tiers, and their backends' names
TOLERANCE = 0.1
P_SHOW = 0.6
P_FALSE = 0.05
P_POLL = 0.3  # tool steps of a client recorded polling that poll its running command instead
ERROR_RUN = 2  # failed tool results a tool-error signal shows in a row
MAX_CALLS = 40
KINDS = ("tool_errors", "correction", "retype", "repeat", "refusal", "empty", "truncated")
FOLLOW_UPS = ("ok, continue", "go on", "continue", "ok, next step please")
CLOSINGS = ("thanks", "thanks, that's all", "great, thank you")
CORRECTIONS = ("Hmm, that doesn't look right to me.", "The numbers don't add up, please look at it again.",
               "I don't think so. Have another go at it.", "Not quite what I asked for.",
               "Your answer is off, check the working once more.")
RETYPES = ("Let me ask again: {task}", "{task}\n\n(asking again: the last answer missed the point)",
           "Once more, please. {task}")
REFUSAL = "I'm sorry, but I can't help with that."
INSIST = "Please go ahead, it is fine to do this."
OK_OUTPUTS = (
    "3 passed in 0.12s",
    "def handle(request):\n    user = db.get_user(request.user_id)\n    if not user.is_active:\n        raise "
    "PermissionError('inactive user')\n    total = 0\n    for item in request.items:\n        total += item.price * "
    "item.quantity\n    return Response(total=total, currency=user.currency)\n",
    "src/app.py\nsrc/handlers.py\ntests/test_app.py\nREADME.md\n",
    "Updated 1 file: src/app.py (+4 -2)",
    # real outputs of a scratch project whose files and tests are named for errors, all passing
    "tests/test_error_handling.py::test_error_message PASSED                  [ 50%]\n"
    "tests/test_error_handling.py::test_unknown_error PASSED                  [100%]\n"
    "============================== 2 passed in 0.66s ===============================\n",
    "src:\nerror_codes.py\nerrors.py\n\nlogs:\nerror.log\n",
    "src/errors.py:4:def error_message(code):\nsrc/errors.py:5:    return ERROR_CODES.get(code, \"unknown error\")\n",
)
ERROR_OUTPUTS = (
    "\u2717 total: expected 42, received 41\n    at tests/app.test.js:12:5\n\nTests: 1 failed, 2 passed, 3 total\n",
    "Segmentation fault (core dumped)\n",
    "thread 'main' panicked at src/main.rs:7:5:\nattempt to multiply with overflow\n"
    "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
)


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    dataset: str
    prompt: str
    local: float
    hosted: float

    @property
    def weak_good(self) -> bool:
        return self.local >= self.hosted - TOLERANCE

    @property
    def strong_good(self) -> bool:
        return self.hosted >= self.local - TOLERANCE

    def good(self, tier: str) -> bool:
        """Whether an answer from `tier` is good enough, by the labels alone."""
        return self.strong_good if tier == STRONG else self.weak_good


@dataclass(frozen=True, slots=True)
class Plan:
    """A session's dice, the same in every mode. `beats`: the task's steps, in order: the
    model's ("tool", "text") and the user's ("user": a follow-up, "close": the closing turn)."""

    beats: tuple[str, ...]
    kind: str
    shows: bool
    false_signal: bool
    arm_at: int
    follow_up: str
    closing: str
    correction: str
    seed: int


@dataclass(frozen=True, slots=True)
class Session:
    key: str
    task: Task
    harness: Harness
    plan: Plan


@dataclass(frozen=True, slots=True)
class Signal:
    """A failing answer (call `at`, from `tier`), shown to the router in request `at + 1`."""

    kind: str
    true: bool
    at: int
    tier: str


def draw_plan(rng: random.Random, tools: bool, turn: int, tool_failures: bool | None = None) -> Plan:
    """A session's dice; its signal kind is the `turn`-th in rotation (each kind as often).
    `tool_failures`: the client was recorded reporting failed steps (a tool-error signal is one
    of those recordings); a client that was not (the SDKs: the application writes the result)
    shows the others only. None: as `tools`."""
    beats = ["tool"] * (rng.randint(1, 3) if tools else 0) + ["text"]
    if rng.random() < 0.5:
        beats += ["user", *["tool"] * (rng.randint(0, 2) if tools else 0), "text"]
    answers = sum(b in ("tool", "text") for b in beats)  # the task's answers, before any closing turn
    if rng.random() < 0.3:
        beats += ["close", "text"]
    kinds = KINDS if (tools if tool_failures is None else tools and tool_failures) else KINDS[1:]
    return Plan(tuple(beats), kinds[turn % len(kinds)], False, False, rng.randrange(answers), rng.choice(FOLLOW_UPS),
                rng.choice(CLOSINGS), rng.choice(CORRECTIONS), rng.getrandbits(32))


def workload(tasks: list[Task], harnesses: list[Harness], seed: int, per_task: int = 1,
             p_show: float = P_SHOW) -> list[Session]:
    """Each task in `per_task` clients' harnesses, the clients taken in turn over the shuffled
    tasks; a weaker model's failure shows in `p_show` of the sessions it fails."""
    rng = random.Random(seed)
    order = list(tasks)
    rng.shuffle(order)
    sessions = []
    for n in range(len(order) * per_task):
        task, harness = order[n // per_task], harnesses[n % len(harnesses)]
        plan = draw_plan(rng, harness.tool is not None, n // len(harnesses),
                         harness.recorded is not None and bool(harness.recorded.failed))
        sessions.append(Session(f"task-{n}-{task.id}", task, harness, plan))
    # The coins, drawn without replacement so that the shares are the model's exactly: P_SHOW of
    # the sessions whose task the weaker model fails (rounded down), P_FALSE of all of them.
    failing = [i for i, s in enumerate(sessions) if not s.task.weak_good]
    shows = set(rng.sample(failing, int(p_show * len(failing))))
    false = set(rng.sample(range(len(sessions)), round(P_FALSE * len(sessions))))
    return [dataclasses.replace(s, plan=dataclasses.replace(s.plan, shows=i in shows, false_signal=i in false))
            for i, s in enumerate(sessions)]


@dataclass(slots=True)
class _Step:
    """What one answer is, and what the client does next: `then` is "ok" / "error" (a tool
    result), "user" (`text` as a new turn), "resend" (the same request again) or "end"."""

    answer: Answer
    then: str
    text: str = ""
    beats: int = 0  # task steps this answer takes
    signal: Signal | None = None
    errors_left: int | None = None  # a tool-error run: failures still to show (None: no run)
    disarm: bool = False
    poll: bool = False  # the model calls what it called last again, to read a running command's output


@dataclass
class SessionRun:
    """One session as its client runs it: the request to send now, and what a model answers."""

    session: Session
    items: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    beat: int = 0
    armed: bool = True
    errors_left: int | None = None
    closing: bool = False
    final: str | None = None  # the tier of the task's last answer
    signals: list[Signal] = field(default_factory=list)
    rounds: int = 0  # tool calls so far: each with arguments of its own, but a stuck model's
    stuck: bool = False  # the last round failed: the next failing one repeats its call

    def __post_init__(self) -> None:
        self.items = self.session.harness.first_turn(self.session.task.prompt)

    # -- what a model answers ---------------------------------------------------------------

    def answer(self, tier: str) -> Answer:
        """What the model of `tier` answers to the request now (pure: the router may ask twice)."""
        return self._step(tier).answer

    def _step(self, tier: str) -> _Step:
        failing = tier == WEAK and not self.session.task.weak_good
        if self.errors_left is not None:  # a run of failing tool results
            if self.signals[-1].true and not failing:
                return self._normal(tier)
            return _Step(self._tool_call(), "error", errors_left=self.errors_left - 1)
        due = self._due(failing)
        if due in ("true", "false"):
            return self._failure(tier, due == "true")
        return self._normal(tier, disarm=due == "hidden")

    def _due(self, failing: bool) -> str:
        """Whether this answer is the session's signal: "true", "false", "hidden" (a failure
        that stays hidden for good), or "" (not yet, or no longer)."""
        plan = self.session.plan
        if not self.armed or self.closing or self.calls < plan.arm_at:
            return ""
        if failing:
            return "true" if plan.shows else "hidden"
        return "false" if self.calls == plan.arm_at and plan.false_signal else ""

    def _failure(self, tier: str, true: bool) -> _Step:
        plan = self.session.plan
        wrong = self._text(120)  # as long as a good answer: a wrong one looks like one
        steps: dict[str, Callable[[], _Step]] = {
            "tool_errors": lambda: _Step(self._tool_call(), "error", errors_left=ERROR_RUN - 1),
            "correction": lambda: _Step(wrong, "user", plan.correction),
            "retype": lambda: _Step(wrong, "user", self._rng().choice(RETYPES).format(task=self.session.task.prompt)),
            "repeat": lambda: _Step(wrong, "resend"),
            "refusal": lambda: _Step(Answer(REFUSAL, finish_reason="content_filter"), "user", INSIST),
            "empty": lambda: _Step(Answer(""), "resend"),
            "truncated": lambda: _Step(Answer(self._text(400).text.rsplit(" ", 3)[0], finish_reason="length"),
                                       "user", "continue"),
        }
        step = steps[plan.kind]()
        step.signal, step.disarm = Signal(plan.kind, true, self.calls, tier), True
        return step

    def _normal(self, tier: str, disarm: bool = False) -> _Step:
        beats = self.session.plan.beats
        beat = beats[self.beat] if self.beat < len(beats) else "text"
        if beat == "tool":
            # A client recorded polling a running command polls it: the very same call, successful.
            poll = self.session.harness.polls and self.rounds > 0 and self._rng().random() < P_POLL
            return _Step(self._tool_call(), "ok", beats=0 if poll else 1, disarm=disarm, poll=poll)
        after = beats[self.beat + 1] if self.beat + 1 < len(beats) else None
        if after in ("user", "close"):
            plan = self.session.plan
            return _Step(self._text(120), "user", plan.follow_up if after == "user" else plan.closing, beats=2,
                         disarm=disarm)
        return _Step(self._text(120), "end", beats=1, disarm=disarm)

    def _rng(self) -> random.Random:
        return random.Random(f"{self.session.plan.seed}:{self.calls}")  # the same in every mode

    def _tool_call(self) -> Answer:
        harness = self.session.harness
        assert harness.tool is not None
        return Answer(harness.answer_text, tool=harness.tool, call_id=f"call_{self.session.plan.seed}_{self.calls}",
                      finish_reason="tool_calls")

    def _text(self, mean_words: int) -> Answer:
        rng = self._rng()
        words = max(8, int(rng.gauss(mean_words, mean_words / 3)))
        return Answer(" ".join(rng.choice(("the", "answer", "is", "so", "we", "get", "step", "then", "value"))
                               for _ in range(words)) + ".")

    # -- what the client does with it ---------------------------------------------------------

    def advance(self, tier: str, completion: Completion) -> bool:
        """Take the answer `tier`'s model gave; False when the session is over."""
        step = self._step(tier)
        if not self.closing:
            self.final = tier
        if step.signal is not None:
            self.signals.append(step.signal)
        self.armed = self.armed and not step.disarm
        self.errors_left = step.errors_left or None
        self._reply(step, completion)
        self.beat += step.beats
        self.calls += 1
        return step.then != "end" and self.calls < MAX_CALLS

    def _reply(self, step: _Step, completion: Completion) -> None:
        """The client's next request, after this answer."""
        harness = self.session.harness
        if step.then in ("ok", "error"):
            call_id = (completion.tool_calls or [{}])[0].get("id") or step.answer.call_id
            error = step.then == "error"
            rng = self._rng()
            output = rng.choice(ERROR_OUTPUTS if error else OK_OUTPUTS)
            self.rounds += not (error and self.stuck) and not step.poll  # a stuck model, a poll: the same call
            self.stuck = error
            self.items = [*self.items, *harness.tool_round(call_id, output, error=error, step=self.rounds,
                                                           poll=step.poll, pick=rng.choice)]
        elif step.then == "user":
            self.items = harness.with_user_turn([*self.items, harness.text_answer(completion)], step.text)
            self.closing = self.closing or (step.beats == 2 and self.session.plan.beats[self.beat + 1] == "close")

    def request(self) -> list[dict[str, Any]]:
        return self.items
