"""The routing model: the scorer, the tiers and their boundaries, as one versioned value.

Which tier a prompt needs is decided by three things that only make sense together: the
routing scorer, the ladder of tiers with each boundary's threshold, and the heads that decide
boundaries of their own (policies/ladder.py). Learning replaces all three at once, so they
travel as one frozen value: a decision reads the model once and uses that one value
throughout, whatever another task installs meanwhile, and records the `version` it used
(0: the weights the config names).

What is scored is the task, not its wrapping: the user's own words of the latest turn that has
them, with the client's harness (system prompts, tool schemas, environment and reminder blocks,
format rules, tool results) set aside (policies/task.py), so the same question scores the same
from every client, and the same conversation the same with a session id or without one.

Every decision path -- plain calls, streams, sessions, consortia, the server and the framework
adapters -- reads the model through one `ModelSlot`, `current`; learning (router/learning/)
installs a new RoutingModel with one assignment, which the next decision sees whole. A decision reads `current` once and keeps
that value, so it never mixes the scorer of one version with the thresholds of another.

`watch`, when learning is on, is called before every read: it installs a version another
process adopted or rolled back to (router/learning/learner.py `check`), so the next decision
after the change uses it, whether or not a request came in between.

Pure: scorers are handed in already built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backends.types import Message
from policies.ladder import Crossing, Ladder, Tier
from policies.scoring import Score, Scorer
from policies.task import KNOWN, Shapes, Task, read_task, scored_text
from policies.template import Learned

__all__ = ["ModelSlot", "Placement", "RoutingModel"]


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Placement:
    """Where a prompt lands: the tier's index, the routing score, the boundaries looked at, and
    the task that was scored (None when a turn's own words were handed in)."""

    index: int
    score: Score
    crossings: tuple[Crossing, ...]
    task: Task | None = None


@dataclass(frozen=True, slots=True)
class RoutingModel:
    scorer: Scorer
    ladder: Ladder
    version: int = 0  # the learned version it is (0: as configured)

    @property
    def tiers(self) -> tuple[Tier, ...]:
        return self.ladder.tiers

    @property
    def top(self) -> int:
        """The index of the strongest tier."""
        return len(self.ladder.tiers) - 1

    def place(self, messages: list[Message], tools: object = None, shapes: Shapes = KNOWN,
              learned: Learned | None = None) -> Placement:
        """The tier a conversation's task climbs to (`tools`: the request's, named in what was
        set aside; `shapes`: what known clients write, policies/shapes.py; `learned`: what the
        client's own traffic taught, policies/template.py). What is scored is
        `scored_text(task)`, the one input a session's call is scored by too."""
        task = read_task(messages, tools, shapes, learned)
        placement = self.place_text(scored_text(task))
        placement.task = task
        return placement

    def place_text(self, text: str) -> Placement:
        """The tier one user turn's own words (already read from its harness) climb to, alone."""
        messages: list[Message] = [{"role": "user", "content": text}]
        score = self.scorer.score(messages)
        index, crossings = self.ladder.climb(messages, score)
        return Placement(index, score, crossings)

    def reason(self, placement: Placement) -> str:
        """The words a decision's reason opens with."""
        return self.ladder.reason(placement.crossings, placement.score)


class ModelSlot:
    __slots__ = ("_model", "watch")

    def __init__(self, model: RoutingModel):
        self._model = model
        self.watch: Callable[[], None] | None = None

    @property
    def current(self) -> RoutingModel:
        if self.watch is not None:
            self.watch()
        return self._model

    def install(self, model: RoutingModel) -> None:
        self._model = model
