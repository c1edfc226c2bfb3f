"""Health checks for `route doctor`: each backend checks itself (`Backend.check`: its key, its
server's model list, its checkpoint), all at once; consortia from their backends' results; the
request log's database (router/store/) and, with `state: redis`, shared state."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from backends import build_backend
from backends.base import Backend
from backends.errors import RouteError
from backends.served import not_served_hint
from router.config import BackendConfig, Config, StateConfig

if TYPE_CHECKING:
    from router.store.choice import LogTarget

__all__ = ["Check", "check_all", "check_backend", "check_log", "not_served_hint"]


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
        from backends.env_names import lookalike_hint

        return Check(name, False, f"${env} is not set{lookalike_hint(env)}: export it with the API key for "
                                  f"{backend.model}")
    try:
        health = await backend.check(timeout_s)
    except RouteError as exc:
        return Check(name, False, str(exc))
    return Check(name, health.ok, health.detail)


def check_all(config: Config, *, timeout_s: float = 3.0) -> list[Check]:
    """Every backend, then every consortium (from its backends' checks: no second call), then
    the request log (when on), then shared state when `state:` names Redis."""
    backends = asyncio.run(_check_backends(config.backends, timeout_s))
    consortia = [check_consortium(name, config, backends) for name in config.consortia]
    log = [check_log(config, timeout_s=timeout_s)] if config.log.enabled else []
    state = [asyncio.run(check_state(config.state, timeout_s))] if config.state.backend == "redis" else []
    return [*backends.values(), *consortia, *log, *state]


def check_log(config: Config, *, timeout_s: float) -> Check:
    """Whether the request log can be written where the config says: PostgreSQL answers within
    `timeout_s` and its schema is this version's (records spooled locally are counted), or the
    SQLite file passes quick_check (or, not made yet, its directory can be). Never prints a
    password; creates no file."""
    from router.store.choice import log_target

    try:
        target = log_target(config)
    except RouteError as exc:
        return Check("request log", False, str(exc))
    if target.kind == "postgres":
        return _check_postgres(target, timeout_s)
    assert target.path is not None
    return _check_sqlite(target.path)


def _check_postgres(target: LogTarget, timeout_s: float) -> Check:
    from router.store.health import StoreError
    from router.store.postgres import PgStore
    from router.store.schema import SCHEMA_VERSION

    spooled = _spooled(target.spool_dir)
    assert target.dsn is not None and target.timeout_s is not None
    try:
        store = PgStore(target.dsn, timeout_s=min(timeout_s, target.timeout_s))
    except (StoreError, RouteError) as exc:
        return Check("request log", False, f"{exc}{spooled}")
    try:
        with store.guard():
            version = store.schema_version()
    except StoreError as exc:
        return Check("request log", False, f"{exc}{spooled}")
    finally:
        store.close()
    return Check("request log", True, f"{target.label} answers, schema {version} of {SCHEMA_VERSION}{spooled}")


def _spooled(directory: Path | None) -> str:
    """What waits in the spool (records acknowledged while the database was away), if anything."""
    if directory is None or not directory.is_dir():
        return ""
    files = sorted(directory.glob("*.spool"))
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    return f"; {lines} records spooled in {directory}, written once a route process logs again" if lines else ""


def _check_sqlite(path: Path) -> Check:
    from router.store.health import StoreError
    from router.store.sqlite import Store

    if not path.exists():
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), path.parent)
        if parent.is_dir() and os.access(parent, os.W_OK):
            return Check("request log", True, f"{path} (not written yet; {parent} is writable)")
        return Check("request log", False, f"{path} cannot be made: {parent} is not a writable directory; point "
                                           "log.path at a writable file, or use log.backend: postgres")
    try:
        store = Store(path, check=True)
        with store.guard():
            count = store.count()
        store.close()
    except StoreError as exc:
        return Check("request log", False, str(exc))
    return Check("request log", True, f"{path}: {count} records, quick_check ok")


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
