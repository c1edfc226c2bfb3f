"""The backends and cost panels, and the line saying where each figure comes from.

Read through the Router's public objects: `state()` (learned latency, breakers), `breakers`,
`rate_limits.levels`, `shared.status()`, `request_log`; and this process's LiveView (observed
calls, spend per 10 s). Cheap: built for every poll a page makes while something changed.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

from router.server.ui.live import BUCKET_S, HOUR_S
from router.store.stats import percentile

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.ui.live import LiveView, Sample

__all__ = ["backends_panel", "cost_panel", "sources"]

_SPARK = 40  # recent calls drawn in a backend's sparkline


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def observed(samples: list[Sample]) -> dict[str, Any]:
    """What the backend's recent calls showed: TTFT percentiles and values (the page draws their
    histogram beside the learned percentiles), decode rate, failures, the last calls in order."""
    ok = [s for s in samples if s.ok]
    ttft = [s.ttft_s for s in ok if s.ttft_s is not None]
    rates = [s.decode_tps for s in ok if s.decode_tps]
    failures = len(samples) - len(ok)
    return {"calls": len(samples), "failures": failures, "failure_rate": _share(failures, len(samples)),
            "ttft_p50_s": _r(percentile(ttft, 50)), "ttft_p95_s": _r(percentile(ttft, 95)),
            "decode_tps": _r(percentile(rates, 50), 1), "ttft_s": [_r(v) for v in ttft],
            "spark": [_r(s.ttft_s) if s.ok else None for s in samples[-_SPARK:]]}


def _hour_totals(live: LiveView, by: str) -> dict[str, list[float]]:
    """Name -> [requests, dollars] over the last hour, by "backends" or "keys"."""
    totals: dict[str, list[float]] = {}
    for _, bucket in live.last_hour():
        for name, (n, cost) in getattr(bucket, by).items():
            figures = totals.setdefault(name, [0, 0.0])
            figures[0] += n
            figures[1] += cost
    return totals


def _limits(router: RouterService, name: str, kind: str = "backend") -> list[dict[str, Any]]:
    levels = router.view.rate_limits.levels(name, kind)  # type: ignore[arg-type]
    return [{"what": what, "level": round(level, 1), "limit": limit} for what, (level, limit) in levels.items()]


def backends_panel(router: RouterService, live: LiveView) -> list[dict[str, Any]]:
    state = router.view.state()
    hour = _hour_totals(live, "backends")
    tiers = {b: t.name for t in router.view.tiers for b in t.backends}
    out = []
    for name, spec in router.view.config.backends.items():
        breaker = router.view.breakers[name]
        n, cost = hour.get(name, (0, 0.0))
        out.append({
            "name": name, "kind": spec.kind, "model": spec.model, "tier": tiers.get(name), "decoding": spec.decoding,
            "price": {"input": spec.price.input, "output": spec.price.output},
            "learned": state[name]["latency"], "observed": observed(list(live.samples.get(name, ()))),
            "breaker": {"state": breaker.state, "reopens_in_s": _r(breaker.remaining_s(), 1)},
            "rate_limits": _limits(router, name), "hour": {"requests": int(n), "cost_usd": cost},
        })
    return out


def cost_panel(router: RouterService, live: LiveView, owner: str | None = None) -> dict[str, Any]:
    """Spend per 10 s over the last hour, per backend and per key, beside always-hosted. With
    `owner`, the key named is the only one shown (the totals stay the server's)."""
    buckets = _buckets(live, owner)
    return {
        "window_s": HOUR_S, "bucket_s": BUCKET_S, "buckets": buckets,
        "hosted_backend": _hosted_name(live),
        "total": sum(b["cost"] for b in buckets), "hosted_total": sum(b["hosted"] for b in buckets),
        "keys": _key_totals(router, live, owner),
    }


def _buckets(live: LiveView, owner: str | None) -> list[dict[str, Any]]:
    """Each 10 s of the last hour: requests, cost, always-hosted's, per backend and per key shown."""
    return [{"t": t, "requests": b.requests, "cost": b.cost, "hosted": b.hosted,
             "backends": {k: v[1] for k, v in b.backends.items()},
             "keys": {k: v[1] for k, v in b.keys.items() if owner is None or k == owner}}
            for t, b in live.last_hour()]


def _key_totals(router: RouterService, live: LiveView, owner: str | None) -> list[dict[str, Any]]:
    """Per key shown, the hour's requests and cost, and its rate limits when it is configured."""
    configured = router.view.config.server.keys
    return [{"key": name, "requests": int(n), "cost_usd": cost,
             "rate_limits": _limits(router, name, "key") if name in configured else []}
            for name, (n, cost) in sorted(_hour_totals(live, "keys").items()) if owner is None or name == owner]


def _hosted_name(live: LiveView) -> str | None:
    return live.hosted[0] if live.hosted else None


def _state_words(router: RouterService) -> str:
    status = router.view.shared.status()
    if status.kind == "redis":
        health = "answering" if status.shared else "NOT answering: this replica runs on its own state until it does"
        return (f"Redis at {status.target} ({health}): learned latency, breaker verdicts and rate limits shared "
                "by every replica")
    if status.kind == "local":
        return "the local SQLite store: learned latency shared by this machine's processes; breakers per process"
    return "this process's memory only"


def _log_words(router: RouterService) -> str:
    log = router.view.request_log
    if log is None:
        return "off: no request detail, no fleet figures"
    if router.view.config.log.backend == "postgres":
        return f"PostgreSQL {log.where}, shared by every replica writing to it"
    return f"SQLite {log.where}, shared by this machine's processes"


def sources(router: RouterService, live: LiveView) -> dict[str, Any]:
    """Where each panel's figures come from (a fleet's view differs per replica)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": live.started, "requests": live.seq,
            "listed_since": live.recording_since,
            "state": _state_words(router), "log": _log_words(router),
            "rate_limits": "Redis, shared by every replica" if router.view.rate_limits.link is not None else "this process",
            "config": str(router.view.loaded.path) if router.view.loaded.path else "(in memory)"}
