"""The one reference every decision path reads the routing model through.

Plain calls, streams, sessions, consortia, the server and the framework adapters all decide
through `ModelSlot.current`; learning (router/learning/) installs a new RoutingModel with
one assignment, which the next decision sees whole. A decision reads `current` once and keeps
that value, so it never mixes the scorer of one version with the thresholds of another.
"""

from __future__ import annotations

from policies.routing_model import RoutingModel

__all__ = ["ModelSlot"]


class ModelSlot:
    __slots__ = ("current",)

    def __init__(self, model: RoutingModel):
        self.current = model

    def install(self, model: RoutingModel) -> None:
        self.current = model
