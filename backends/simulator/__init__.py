"""A simulated OpenAI-compatible model server for tests, benchmarks and demos.

Real HTTP on loopback, so the real httpx and litellm code paths run against it; every answer
is synthetic and labelled as such (`x-simulated: true`, `system_fingerprint: "simulated"`,
text starting `[simulated <model>]` unless a test scripted the exact reply).
"""

from backends.simulator.app import SimState, create_app
from backends.simulator.profiles import (
    DEFAULT_PROFILES,
    FALLBACK_PROFILE,
    FAULT_KINDS,
    SimProfile,
    load_profiles,
)
from backends.simulator.runner import SimControl, SimServer, serve

__all__ = [
    "DEFAULT_PROFILES",
    "FALLBACK_PROFILE",
    "FAULT_KINDS",
    "SimControl",
    "SimProfile",
    "SimServer",
    "SimState",
    "create_app",
    "load_profiles",
    "serve",
]
