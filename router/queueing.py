"""Backends that queue requests themselves (the in-process diffusion engine) tell the latency
model where their line stands before each decision, so `--explain` and the plan see the wait."""

from __future__ import annotations

from typing import Any

from policies.latency import LatencyModel, QueueState

__all__ = ["with_queue"]


def with_queue(model: LatencyModel, backend: Any) -> LatencyModel:
    """`model` with the queue of `backend` (None: not built yet, or a backend that keeps no queue)."""
    report = getattr(backend, "queue_state", None)
    state = report() if callable(report) else None
    model.queue = QueueState(**state) if state else None
    return model
