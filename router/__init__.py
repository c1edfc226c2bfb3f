"""Latency-aware LLM router and consortium orchestrator: the public Python API.

    from router import Router
    router = Router.from_config()          # the config search order, or a path / dict
    result = router.complete("Why is the sky blue?")
    print(result.text, result.decision.chosen, result.completion.cost_usd)

What agent code touches is here: the Router and its results, the options, the errors, the
chunks `router.astream()` yields (`TextChunk`, `ThinkingChunk`, `ToolCallChunk`, `DraftChunk`, then
one `FinalChunk` holding the `Completion`), and `Simulator`, the SIMULATED model server in this
process (router/simulator.py). Attributes are imported on first use so that `route --help` stays fast.
"""

from __future__ import annotations

from router.lazy import lazy_exports

__version__ = "0.1.0"  # the one place it is written: pyproject.toml reads it (tool.hatch.version)

__all__ = [
    "AllBackendsFailed",
    "Attempt",
    "BackendError",
    "Chunk",
    "Completion",
    "ConfigError",
    "CostLimitExceeded",
    "DeadlineAtRisk",
    "Decision",
    "Downgrade",
    "DraftChunk",
    "FinalChunk",
    "RouteError",
    "RouteOptions",
    "RouteResult",
    "RouteStream",
    "Router",
    "Simulator",
    "TextChunk",
    "ThinkingChunk",
    "Timings",
    "ToolCallChunk",
    "Usage",
    "UsageError",
    "load_config",
]

_HOMES = {
    "Router": "router.core",
    "RouteStream": "router.scope",
    "Attempt": "router.decision",
    "Decision": "router.decision",
    "Downgrade": "router.decision",
    "RouteResult": "router.decision",
    "load_config": "router.config_loader",
    "AllBackendsFailed": "backends.errors",
    "BackendError": "backends.errors",
    "ConfigError": "backends.errors",
    "CostLimitExceeded": "backends.errors",
    "RouteOptions": "router.options",
    "DeadlineAtRisk": "backends.errors",
    "RouteError": "backends.errors",
    "UsageError": "backends.errors",
    "Chunk": "backends.types",
    "Completion": "backends.types",
    "DraftChunk": "backends.types",
    "FinalChunk": "backends.types",
    "TextChunk": "backends.types",
    "ThinkingChunk": "backends.types",
    "Timings": "backends.types",
    "ToolCallChunk": "backends.types",
    "Usage": "backends.types",
    "Simulator": "router.simulator",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
