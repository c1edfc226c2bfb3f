"""Health checks for `route doctor`: each backend checks itself (`Backend.check`: its key, its
server's model list, its checkpoint), all at once; consortia from their backends' results."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass

from backends import build_backend
from backends.base import Backend
from backends.errors import RouteError
from backends.served import not_served_hint
from router.config import BackendConfig, Config, StateConfig

__all__ = ["Check", "check_all", "check_backend", "not_served_hint"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_backend(name: str, spec: BackendConfig, *, timeout_s: float) -> Check:
    """One backend's own check (`Backend.check`): no model call, nothing spent."""
    return asyncio.run(_check_backends({name: spec}, timeout_s))[name]


async def _check_backends(specs: Mapping[str, BackendConfig], timeout_s: float) -> dict[str, Check]:
    backends = {name: build_backend(spec.kind, spec.settings(name)) for name, spec in specs.items()}
    try:
        found = await asyncio.gather(*(_check_one(name, backend, timeout_s) for name, backend in backends.items()))
    finally:
        for backend in backends.values():
            await backend.aclose()
    return dict(zip(backends, found))


async def _check_one(name: str, backend: Backend, timeout_s: float) -> Check:
    env = backend.settings.api_key_env
    if env and not os.environ.get(env):
        return Check(name, False, f"${env} is not set: export it with the API key for {backend.model}")
    try:
        health = await backend.check(timeout_s)
    except RouteError as exc:
        return Check(name, False, str(exc))
    return Check(name, health.ok, health.detail)


def check_all(config: Config, *, timeout_s: float = 3.0) -> list[Check]:
    """Every backend, then every consortium (from its backends' checks: no second call), then
    shared state when `state:` names Redis."""
    backends = asyncio.run(_check_backends(config.backends, timeout_s))
    consortia = [check_consortium(name, config, backends) for name in config.consortia]
    state = [asyncio.run(check_state(config.state, timeout_s))] if config.state.backend == "redis" else []
    return [*backends.values(), *consortia, *state]


async def check_state(state: StateConfig, timeout_s: float) -> Check:
    """Whether replicas can share state through the Redis `state.url` names (never printed: it may
    hold a password; host:port is)."""
    from router.state.redis_state import RedisState

    try:
        link = RedisState.from_config(state).link
    except RouteError as exc:
        return Check("shared state", False, str(exc))
    link.timeout_s = timeout_s
    try:
        problem = await link.ping()
    finally:
        await link.aclose()
    if problem is None:
        return Check("shared state", True, f"redis at {link.target} reachable: latency and breakers are shared")
    return Check("shared state", False, f"redis at {link.target} {problem}: each replica runs on its own state "
                                        "until it answers")


def check_consortium(name: str, config: Config, backends: dict[str, Check]) -> Check:
    """A consortium whose arbiter cannot answer still answers, unjudged: say so before it happens.
    Members are fine while the quorum can still be met. Nested consortia are checked the same way."""
    def can_answer(member: str) -> Check:
        return backends[member] if member in backends else check_consortium(member, config, backends)

    spec = config.consortia[name]
    arbiter = can_answer(spec.arbiter)
    if not arbiter.ok:
        return Check(name, False, f"arbiter {spec.arbiter} cannot answer ({arbiter.detail}); answers would be "
                                  "unjudged member answers")
    members = [m.model for m in spec.members for _ in range(m.n)]
    up = sum(can_answer(m).ok for m in members)
    need = spec.quorum or 1  # without a quorum, one answer is enough (consortium.py)
    if up < need:
        return Check(name, False, f"only {up} of {len(members)} member calls can be made; it needs {need}")
    return Check(name, True, f"{len(members)} member calls, arbiter {spec.arbiter}")
