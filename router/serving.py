"""The router a `route serve` process serves, built from its config: the composition of a
server process (the server itself, router/server/, takes the router it is handed).

`python -m router.serving` is one worker of `route serve --workers N` (router/server/worker.py
says how the parent talks to it).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from typing import TYPE_CHECKING

from router.config_loader import LoadedConfig
from router.core import Router

if TYPE_CHECKING:
    from router.state.group import GroupShare

__all__ = ["serving_router"]


def serving_router(loaded: LoadedConfig, *, keep_log: bool, api_key_env: str | None,
                   group: str | None = None) -> Router:
    """The Router a server process serves. `group`: the table a `--workers` supervisor shares
    among its workers (limits and breakers), used unless Redis shares them already."""
    redis = loaded.config.state.backend == "redis"
    share = _group_share(loaded, group, latency=keep_log) if group is not None and not redis else None
    clients_keys = filter(None, [api_key_env, *(k.env for k in loaded.config.server.keys.values())])
    # A server's clients retry on their own: a backend not yet heard answering is not retried.
    # What earlier runs learned about latency, or the group's state; the app's shutdown
    # (router.aclose) saves it back. Redis needs no local file.
    persist = share.state if share is not None else (keep_log or redis)
    router = Router(loaded, source="server", clients_retry=True, log=None if keep_log else False,
                    rate_limits=share.limiter if share is not None else None, persist=persist,
                    secret_variables=clients_keys)  # clients' keys: never echoed either
    router.warn_unshared()
    return router


def _group_share(loaded: LoadedConfig, group: str, *, latency: bool) -> GroupShare | None:
    """What this worker shares with its `--workers` group; None when it cannot (said once)."""
    from router.state.group import open_group

    opened = open_group(loaded.config, group, latency=latency)
    return None if isinstance(opened, str) else opened


def main() -> int:
    from backends.errors import RouteError
    from router.config_loader import load_config
    from router.server.worker import ServeSpec, run_server, stop_when_parent_goes, tell_ready

    spec = ServeSpec(**json.loads(sys.stdin.buffer.readline()))
    sock = socket.socket(fileno=spec.fd)
    threading.Thread(target=stop_when_parent_goes, name="route-worker-parent", daemon=True).start()
    try:
        router = serving_router(load_config(spec.config), keep_log=spec.keep_log, api_key_env=spec.api_key_env,
                                group=spec.group_state)
        tell_ready(spec.ready_fd)
        run_server(router, spec, sock)
    except RouteError as exc:
        print(f"route serve worker {os.getpid()}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # uvicorn re-raises the SIGINT that forced it to stop
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
