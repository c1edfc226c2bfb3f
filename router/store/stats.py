"""Per-backend figures from request-log rows, for `route stats`. Pure: rows in, numbers out.

Latency percentiles, time to first token and tokens/s are over successful requests only (a
failure's duration says how long the backend took to fail, not how fast it answers); the error
rate is errors over all requests that were not cancelled by the client. Per tier (the tier the
scorer chose for the prompt): how many requests, and how many a weaker tier answered (downgrades).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BackendStats", "TierStats", "percentile", "summarize", "summarize_tiers"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation, like numpy's default; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class BackendStats:
    backend: str
    requests: int
    share: float  # of all requests in the window, 0..1
    errors: int
    cancelled: int
    error_rate: float  # errors / (requests - cancelled)
    p50_s: float | None
    p95_s: float | None
    ttft_p50_s: float | None
    tokens_per_s: float | None  # median decode rate of successful requests
    input_tokens: int
    output_tokens: int
    cost_usd: float

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def summarize(rows: Iterable[Mapping[str, Any]]) -> list[BackendStats]:
    """One BackendStats per backend, busiest first."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("backend") or "-", []).append(row)
    total = sum(len(g) for g in groups.values())
    stats = [_one(name, group, total) for name, group in groups.items()]
    return sorted(stats, key=lambda s: (-s.requests, s.backend))


def _present(rows: list[Mapping[str, Any]], key: str) -> list[float]:
    return [r[key] for r in rows if r.get(key) is not None]


def _total(rows: list[Mapping[str, Any]], key: str) -> float:
    return sum(r.get(key) or 0 for r in rows)


def _one(backend: str, rows: list[Mapping[str, Any]], total: int) -> BackendStats:
    ok = [r for r in rows if r.get("status") == "ok"]
    statuses = Counter(r.get("status") for r in rows)
    errors, cancelled = statuses["error"], statuses["cancelled"]
    latencies = _present(ok, "total_s")
    counted = len(rows) - cancelled
    return BackendStats(
        backend=backend,
        requests=len(rows),
        share=len(rows) / total if total else 0.0,
        errors=errors,
        cancelled=cancelled,
        error_rate=errors / counted if counted else 0.0,
        p50_s=percentile(latencies, 50),
        p95_s=percentile(latencies, 95),
        ttft_p50_s=percentile(_present(ok, "ttft_s"), 50),
        tokens_per_s=percentile([v for v in _present(ok, "decode_tps") if v], 50),
        input_tokens=int(_total(rows, "input_tokens")),
        output_tokens=int(_total(rows, "output_tokens")),
        cost_usd=float(_total(rows, "cost_usd")),
    )


@dataclass(frozen=True, slots=True)
class TierStats:
    tier: str
    requests: int
    downgraded: int  # answered by a weaker tier's backend
    downgraded_to: dict[str, int]  # weaker tier -> requests it answered

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def summarize_tiers(rows: Iterable[Mapping[str, Any]]) -> list[TierStats]:
    """One TierStats per tier a routed request was scored into, busiest first (forced requests,
    which have no tier, are left out)."""
    groups: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for row in rows:
        tier = row.get("tier")
        if not tier:
            continue
        counts[tier] += 1
        to = row.get("downgraded_to")
        groups.setdefault(tier, Counter())
        if to:
            groups[tier][to] += 1
    stats = [TierStats(tier, counts[tier], sum(to.values()), dict(to)) for tier, to in groups.items()]
    return sorted(stats, key=lambda s: (-s.requests, s.tier))
