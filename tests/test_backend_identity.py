"""What is learned about a backend belongs to what the backend is -- its kind, endpoint and
model -- not to its name: an example config that calls its simulated model `mercury-2` must
not lend the shipped config's real, hosted `mercury-2` the simulator's timings through the
store they share (issue 36: it did). Through the real local store and the simulator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from router.backend_table import backend_identity
from router.config_loader import load_config
from router.core import Router

pytestmark = pytest.mark.integration


def _config(tmp_path: Path, base_url: str, model: str) -> dict:
    return {"backends": {"mercury-2": {"kind": "openai", "model": model, "base_url": base_url, "max_retries": 0}},
            "routing": {"tiers": [{"name": "all", "backends": ["mercury-2"]}],
                        "latency": {"flush_interval_ms": 0}, "sessions": {"enabled": False}},
            "log": {"enabled": False, "path": str(tmp_path / "route.db")}}  # fmt: skip


def test_two_backends_of_one_name_keep_their_own_latency_in_a_shared_store(sim, tmp_path):
    simulated = _config(tmp_path, sim.base_url, "m-sim")
    hosted = _config(tmp_path, "https://api.inceptionlabs.ai/v1", "mercury-2")
    with Router.from_config(simulated, persist=True) as router:
        for _ in range(3):
            router.complete("hi")
    with Router.from_config(hosted, persist=True) as other:
        assert other.state()["mercury-2"]["latency"]["samples"] == 0  # the simulator's timings stayed its own
    with Router.from_config(simulated, persist=True) as again:
        assert again.state()["mercury-2"]["latency"]["samples"] > 0  # ... and are still there for it


def test_the_identity_names_kind_endpoint_and_model():
    def identity(**changes: str) -> str:
        spec = {"kind": "openai", "model": "m", "base_url": "http://a/v1"} | changes
        config = load_config({"backends": {"b": spec}, "routing": {"tiers": [{"name": "t", "backends": ["b"]}]}})
        return backend_identity(config.config, "b")

    same = identity()
    assert same.startswith("b#") and same == identity()
    assert len({same, identity(kind="litellm"), identity(model="n"), identity(base_url="http://b/v1")}) == 4
