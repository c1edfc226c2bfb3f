"""`route serve`: the router as an OpenAI-compatible (and Anthropic, Responses) API, one process or
a supervised group of workers (router/server/)."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, NoLog, QuietServer
from router.cli.output import Output

__all__ = ["app", "serve"]

app = command_app()


@app.command("serve", help="Serve the router as an OpenAI-compatible API (model `auto`, each backend, each "
                           "consortium) for editors and agents. Ctrl-C drains in-flight streams, then stops.")
@handle_errors
def serve(
    host: Annotated[str, typer.Option("--host", help="Bind address; beyond loopback needs --api-key-env.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port (shown at start).")] = 4000,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", help="Name of the environment variable holding the bearer token clients must send.")] = None,
    no_log: NoLog = False,
    workers: Annotated[int, typer.Option(
        "--workers", min=1, max=256, help="Processes serving the port, each one event loop (about one core) with "
        "its own router from the config; connections are spread over them. Rate limits and breakers are shared "
        "by the workers, learned latency through the local store (or all of it through Redis: `state:` in the "
        "config); a worker that dies is replaced; /metrics adds up every worker; --max-connections is per "
        "worker. About one per core.")] = 1,
    max_body: Annotated[int, typer.Option("--max-body", min=1024, help="Largest request body, bytes.")] = 16 * 1024 * 1024,
    drain: Annotated[float, typer.Option("--drain-timeout", min=0.0, help="Seconds to let streams finish on shutdown.")] = 30.0,
    header_timeout: Annotated[float, typer.Option(
        "--header-timeout", min=0.1, help="Seconds a client may take to send a request head; then 408, closed.")] = 10.0,
    body_timeout: Annotated[float, typer.Option(
        "--body-timeout", min=0.1, help="Seconds a client may take to send a request body; then 408.")] = 60.0,
    max_header: Annotated[int, typer.Option(
        "--max-header-bytes", min=1024, help="Largest request head (request line and headers), bytes.")] = 64 * 1024,
    max_connections: Annotated[int, typer.Option(
        "--max-connections", min=1, help="Open connections at most (idle keep-alive ones count); then 503.")] = 1024,
    quiet: QuietServer = False,
    config: Config = None,
) -> None:
    from router.config_loader import load_config
    from router.server.keys import server_keys
    from router.server.limits import ServerLimits
    from router.server.worker import ServeSpec, run_server
    from router.serving import serving_router
    from router.store.choice import request_log_on

    out = Output()
    loaded = load_config(config)
    keys = server_keys(loaded, host, api_key_env)  # --api-key-env and server.keys, from the environment
    # --no-log opens no file at all (latency is then learned for this run only); an unusable
    # local store is one warning, then a SQLite log and latency learning are off (a
    # PostgreSQL log needs no local file).
    keep = request_log_on(loaded, out, no_log=no_log, check=True)
    limits = ServerLimits(header_timeout_s=header_timeout, body_timeout_s=body_timeout,
                          max_header_bytes=max_header, max_connections=max_connections)
    spec = ServeSpec(config=str(loaded.path), host=host, api_key_env=api_key_env, keep_log=keep,
                     max_body=max_body, drain_s=drain, limits=dataclasses.asdict(limits), quiet=quiet)
    names = [*loaded.config.backends, *loaded.config.consortia]
    shown = f"[{host}]" if ":" in host else host
    auth = f"on (keys: {', '.join(keys)})" if keys else "off (loopback)"  # names only, never a key
    if workers > 1:
        from router.server.workers import listening_sockets, supervise

        sockets = listening_sockets(host, port, workers)
        url = f"http://{shown}:{sockets[0].getsockname()[1]}"
        out.info(f"route serve: {url}/v1 · web view {url}/ui · config {loaded.path} · "
                 f"models: auto, {', '.join(names)} · auth {auth} · log {'on' if keep else 'off'} · "
                 f"{workers} workers")
        supervise(spec, sockets, workers)
        return
    from backends.threaded_server import bind_socket

    sock = bind_socket(host, port)
    router = serving_router(loaded, keep_log=keep, api_key_env=api_key_env)
    url = f"http://{shown}:{sock.getsockname()[1]}"
    out.info(f"route serve: {url}/v1 · web view {url}/ui · config {loaded.path} · models: auto, "
             f"{', '.join(names)} · auth {auth} · "
             f"log {'on: ' + router.request_log.where if router.request_log else 'off'}")
    run_server(router, spec, sock)
