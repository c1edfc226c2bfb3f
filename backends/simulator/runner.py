"""Start and stop the simulated server: in a background thread for tests, or blocking for the CLI.

    with SimServer() as sim:                 # or: async with SimServer() as sim:
        sim.set_faults("mercury-2", ["500", None])
        httpx.post(f"{sim.base_url}/chat/completions", json=...)

The control helpers are plain sync HTTP calls; the server runs on its own thread and loop, so
they are safe to call from async tests too. `SimControl(url)` drives a simulator running in
another process (`python -m backends.simulator --port 0` prints its URL) the same way.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from backends.simulator.app import create_app
from backends.simulator.profiles import SimProfile, load_profiles
from backends.simulator.tools import Reply
from backends.threaded_server import ThreadedServer, bind_socket

__all__ = ["SimControl", "SimServer", "serve"]

ProfilesSource = str | Path | Mapping[str, SimProfile | Mapping[str, Any]] | None
_EMPTY_STATS = {"requests": 0, "completed": 0, "in_flight": 0, "peak_in_flight": 0, "cancelled": 0, "faults": 0}


class SimControl:
    """Thin wrappers over a simulator's /sim control endpoints."""

    def __init__(self, url: str):
        """For a simulator at `url` (its root, without /v1), e.g. one in another process."""
        self._control: httpx.Client | None = httpx.Client(base_url=url, trust_env=False, timeout=10.0)

    def set_faults(self, model: str, sequence: list[str | None]) -> None:
        """Queue faults for the next requests to `model`, one each; None = healthy."""
        self._post("/sim/faults", {"model": model, "sequence": list(sequence)})

    def script(self, model: str, replies: list[Reply]) -> None:
        """Answer `model`'s requests with `replies`, in turn, cycling (a reply may hold tool calls:
        backends/simulator/tools.py)."""
        self._post("/sim/script", {"model": model, "replies": list(replies)})

    def update_profile(self, model: str, **fields: Any) -> dict[str, Any]:
        """Change `model`'s profile from the next request on; returns the new profile."""
        return self._post("/sim/profiles", {"model": model, **fields})["profile"]

    def stats(self, model: str | None = None) -> dict[str, Any]:
        """Counts per model, or for one model (zeros if it was never asked)."""
        models = self._client().get("/sim/stats").raise_for_status().json()["models"]
        return dict(models.get(model, _EMPTY_STATS)) if model is not None else models

    def reset(self) -> None:
        """Starting profiles back; no queued faults, scripts or stats."""
        self._post("/sim/reset", {})

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self._client().post(path, json=body)
        if response.status_code == 400:
            raise ValueError(response.json()["error"]["message"])
        return response.raise_for_status().json()

    def _client(self) -> httpx.Client:
        if self._control is None:
            raise RuntimeError("SimServer is not running; use it as a context manager")
        return self._control


class SimServer(ThreadedServer, SimControl):
    """The simulator on a loopback port (0 = any free port), served by uvicorn on a thread."""

    def __init__(self, profiles: ProfilesSource = None, host: str = "127.0.0.1", port: int = 0, *,
                 strict_models: bool = False):
        app = create_app(None if profiles is None else load_profiles(profiles), strict_models=strict_models)
        # A short graceful shutdown ends hung requests that clients still hold open.
        ThreadedServer.__init__(self, app, host=host, port=port, name="sim-server", timeout_graceful_shutdown=2)
        self._control = None

    def start(self, timeout_s: float = 10.0) -> SimServer:
        super().start(timeout_s)
        self._control = httpx.Client(base_url=self.url, trust_env=False, timeout=10.0)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.close()
        super().stop(timeout_s)

    async def __aenter__(self) -> SimServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.stop)


def serve(host: str = "127.0.0.1", port: int = 8000, profiles: ProfilesSource = None,
          sock: socket.socket | None = None) -> None:
    """Run the simulator in the foreground until interrupted (for `route sim`), on `sock` when
    given (bound by the caller, so a busy port is a usage error before anything starts).
    Port 8000 is vLLM's default, so a config written for a local vLLM reaches it unchanged."""
    app = create_app(None if profiles is None else load_profiles(profiles))
    config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=False,
                            timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock if sock is not None else bind_socket(host, port)])
