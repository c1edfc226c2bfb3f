"""A backend's own line of requests is part of its latency prediction (pure policy, no I/O)."""

from __future__ import annotations

import pytest

from policies.latency import LatencyModel, Prior, QueueState

pytestmark = pytest.mark.unit


def test_batches_ahead_counts_the_running_batch_and_full_waiting_batches():
    assert QueueState().batches_ahead == 0
    assert QueueState(running=1, max_batch=4).batches_ahead == 1  # a running batch cannot be joined
    assert QueueState(waiting=3, running=4, max_batch=4).batches_ahead == 1  # joins the three waiting
    assert QueueState(waiting=4, running=4, max_batch=4).batches_ahead == 2
    assert QueueState(waiting=2, running=1, max_batch=1).batches_ahead == 3


def test_prediction_adds_the_wait_and_shows_it():
    model = LatencyModel("diffusion", canvas_length=256, prior=Prior(ttft_s=0.0, canvas_s=0.25))
    alone = model.predict(256)
    model.queue = QueueState(waiting=4, running=4, max_batch=4)
    queued = model.predict(256)
    assert queued.queue_s == 2 * alone.p50_s and queued.p50_s == 3 * alone.p50_s
    assert queued.first_p50_s == alone.first_p50_s + queued.queue_s
    assert queued.as_dict()["queue"] == {"waiting": 4, "running": 4, "max_batch": 4, "wait_p50_s": queued.queue_s}
    assert "queue" not in alone.as_dict()


def test_time_spent_queued_is_not_learned_as_the_backends_speed():
    from backends.types import Completion, DiffusionStats, Timings, Usage
    from router.decision import Attempt
    from router.latency_tracker import LatencyTracker

    def learned(total_s: float, metadata: dict) -> float:
        tracker = LatencyTracker({"local": LatencyModel("diffusion", canvas_length=256)})
        completion = Completion(text="x", backend="local", model="m", usage=Usage(5, 256),
                                timings=Timings(ttft_s=total_s, total_s=total_s),
                                diffusion=DiffusionStats(canvases=1), metadata=metadata)
        for _ in range(20):
            tracker.observe(Attempt(backend="local", elapsed_s=total_s, completion=completion))
        return tracker.model("local").predict(256).p50_s

    alone = learned(0.5, {})
    assert learned(2.5, {"queue": {"ahead": 3, "running": 1, "max_batch": 4, "wait_s": 2.0}}) == alone
    assert learned(2.5, {}) > alone
