"""Backends that queue requests themselves (the in-process diffusion engine) tell the latency
model where their line stands before each decision, so `--explain` and the plan see the wait;
and the time a request spent in that line is not learned as the backend's own speed (the
prediction adds the wait from the queue, it must not be counted twice)."""

from __future__ import annotations

from typing import Any

from backends.types import Completion
from policies.latency import LatencyModel, QueueState

__all__ = ["queue_wait_s", "with_queue"]


def with_queue(model: LatencyModel, backend: Any) -> LatencyModel:
    """`model` with the queue of `backend` (None: not built yet, or a backend that keeps no queue)."""
    report = getattr(backend, "queue_state", None)
    state = report() if callable(report) else None
    model.queue = QueueState(**state) if state else None
    return model


def queue_wait_s(completion: Completion) -> float:
    """Seconds the request waited in the backend's own queue before generation began (0 if none)."""
    queue = completion.metadata.get("queue")
    wait = queue.get("wait_s") if isinstance(queue, dict) else None
    return float(wait) if isinstance(wait, (int, float)) and wait > 0 else 0.0
