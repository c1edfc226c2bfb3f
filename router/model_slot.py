"""The one reference every decision path reads the routing model through.

Plain calls, streams, sessions, consortia, the server and the framework adapters all decide
through `ModelSlot.current`; learning (router/learning/) installs a new RoutingModel with
one assignment, which the next decision sees whole. A decision reads `current` once and keeps
that value, so it never mixes the scorer of one version with the thresholds of another.

`watch`, when learning is on, is called before every read: it installs a version another
process adopted or rolled back to (router/learning/learner.py `check`), so the next decision
after the change uses it, whether or not a request came in between.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.routing_model import RoutingModel

__all__ = ["ModelSlot"]


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
