"""Which store a config uses: decided here, once, for everything that reads or writes one.

Two choices, made apart:
- the request log (with its feedback and spend): `log.backend` -- the local SQLite file
  (`log.path`, else `route.db` in the user data dir) or PostgreSQL (`log.dsn`, expanded from the
  environment). `log_target` says which; `open_log` opens it for reading and for feedback.
- the learned latency, when `state.backend` is local: the local SQLite file, always
  (`latency_store_for`), whatever the log's backend. A Redis state does not use it.

A PostgreSQL log needs no local file: its spool directory (`log.spool_dir`, else `spool/` in the
user data dir) is only created if the database goes away under `flush_interval_ms: 0`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from backends.errors import ConfigError
from backends.secrets import MissingVariable, expand
from router.paths import user_data_dir
from router.store.health import StoreError
from router.store.sqlite import Store, default_store_path

if TYPE_CHECKING:
    from router.config import Config
    from router.store.latency import LatencyStore
    from router.store.queries import LogReader

__all__ = ["LogTarget", "latency_store_for", "local_path", "local_store_usable", "log_target", "open_log",
           "request_log_on", "spool_dir_for", "store_for"]


@dataclass(frozen=True, slots=True)
class LogTarget:
    """Where a config's request log lives. `label` names it in messages (never a password)."""

    kind: Literal["sqlite", "postgres"]
    label: str
    path: Path | None = None  # sqlite
    dsn: str | None = None  # postgres, expanded: holds the password, never shown
    timeout_s: float | None = None  # postgres
    spool_dir: Path | None = None  # postgres


def _config(loaded: Any) -> Config:
    return getattr(loaded, "config", loaded)


def local_path(config: Config) -> Path:
    """The local SQLite file: `log.path`, else route.db in the user data dir."""
    return Path(config.log.path).expanduser() if config.log.path else default_store_path()


def spool_dir_for(spool_dir: str | None, label: str) -> Path:
    """The spool of the database `label` names: one directory per database, so two logs never
    replay into each other's."""
    base = Path(spool_dir).expanduser() if spool_dir else user_data_dir() / "spool"
    return base / hashlib.sha256(label.encode()).hexdigest()[:16]


def log_target(loaded: Any) -> LogTarget:
    """The request log `loaded` (a LoadedConfig, for file and line in errors, or a Config)
    names. A ConfigError when its DSN variable is unset or the PostgreSQL driver is missing."""
    config = _config(loaded)
    settings = config.log
    if settings.backend != "postgres" or not settings.dsn:
        path = local_path(config)
        return LogTarget("sqlite", str(path), path=path)
    from router.store.postgres import describe_dsn, require_driver

    where = getattr(loaded, "path", None)
    line = loaded.line_of("log", "dsn") if hasattr(loaded, "line_of") else None
    require_driver(f"{where}:{line}: " if where and line else "")
    try:
        dsn = expand(settings.dsn)
    except MissingVariable as exc:
        raise ConfigError(f"log.dsn names ${{{exc.name}}}, which is not set; export the PostgreSQL connection string "
                          f"in {exc.name} (postgresql://user:password@host:5432/db), or set log.backend: sqlite.",
                          path=where, line=line) from None
    label = describe_dsn(dsn)
    return LogTarget("postgres", label, dsn=dsn, timeout_s=settings.timeout_ms / 1000,
                     spool_dir=spool_dir_for(settings.spool_dir, label))


def open_log(loaded: Any, *, check: bool = True) -> LogReader:
    """The config's request log, open: for `route log`, `route stats`, feedback and the spend
    cap. SQLite (with `check`, quick_check first) or PostgreSQL; a StoreError names what is wrong."""
    target = log_target(loaded)
    if target.kind == "sqlite":
        assert target.path is not None
        return Store(target.path, check=check)
    from router.store.postgres import PgStore

    assert target.dsn is not None and target.timeout_s is not None
    return PgStore(target.dsn, timeout_s=target.timeout_s)


def store_for(config: Config, *, check: bool = False, repair: bool = False) -> Store:
    """The local SQLite file as a request log."""
    return Store(local_path(config), check=check, repair=repair)


def latency_store_for(config: Config, *, repair: bool = True) -> LatencyStore:
    """The learned latency of `state: backend: local`, in the local SQLite file; a damaged file
    is moved aside (one warning) and a fresh one started."""
    from router.store.latency import LatencyStore

    return LatencyStore(local_path(config), repair=repair)


def local_store_usable(config: Config, out: Any, *, check: bool = False) -> bool:
    """Whether a CLI command that can do without the local store should use it. Opening it
    moves a damaged file aside; an unusable one (read-only or missing directory, full disk)
    gives one warning through `out` and False."""
    try:
        store_for(config, check=check, repair=True).close()
    except StoreError as exc:
        out.info(f"[yellow]warning:[/] {exc} Running with the request log and latency learning off.")
        return False
    return True


def request_log_on(loaded: Any, out: Any, *, no_log: bool, check: bool = False) -> bool:
    """Whether `route "..."` or `route serve` writes the request log. `--no-log` opens nothing.
    A PostgreSQL log needs no local file. A SQLite log needs the local store: unusable, it is
    one warning and False (the log and latency learning off)."""
    if no_log:
        return False
    config = _config(loaded)
    if config.log.backend == "postgres":
        return True
    return local_store_usable(config, out, check=check)
