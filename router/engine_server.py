"""An OpenAI-compatible HTTP server over one in-process backend (the local DiffusionGemma engine).

    route engine serve --model /models/diffusiongemma-26B-A4B-it      # 127.0.0.1:8000

Other tools, and other router instances (`kind: openai, base_url: http://127.0.0.1:8000/v1`),
then use the engine like vLLM. It is `route serve`'s app (router/server/app.py) over a Router
of this one backend, serving chat completions alone: the same request flow, schema, stream
writer, deadline and redaction. The stream carries committed text only -- OpenAI clients would
append drafts as text -- unless the client asks for Mercury's `"diffusing": true`: then every
event holds the whole answer so far, drafts included, and the last one the answer itself, so
`route --watch` on another machine shows the canvas denoising. Thinking goes out as
`reasoning_content`, as vLLM's reasoning parsers send it. DiffusionGemma settings
(max_denoising_steps, entropy_bound, t_min, t_max, stability_threshold, confidence_threshold,
seed) may be sent as extra body fields; other unknown fields are ignored, as vLLM does. Any model
name reaches the engine, and GET /v1/models lists the one it serves.
"""

from __future__ import annotations

from typing import Any

from backends.base import Backend
from backends.diffusion.engine import GENERATION_KEYS
from backends.threaded_server import ThreadedServer
from router.config_loader import load_config
from router.core import Router

__all__ = ["EngineServer", "create_app"]

_PASSED = (*GENERATION_KEYS, "seed", "thinking", "reasoning_effort", "tools", "tool_choice", "parallel_tool_calls")
_PATHS = ("/v1/chat/completions", "/chat/completions")


def _router(backend: Backend, name: str) -> Router:
    """A Router of `backend` alone, under the name it is served as; a local engine is not
    retried (a failure there would repeat) and logs nothing."""
    settings = backend.settings
    config = {"backends": {name: {"kind": "openai", "model": backend.model, "max_retries": 0,
                                  "decoding": settings.decoding, "canvas_length": settings.canvas_length}},
              "routing": {"tiers": [{"name": "engine", "backends": [name]}], "sessions": {"enabled": False}},
              "aliases": {"*": name}, "log": {"enabled": False}}
    return Router(load_config(config), backends={name: backend}, source="server", clients_retry=True, log=False)


def create_app(backend: Backend, served_name: str | None = None):
    """The ASGI app serving `backend` under the model id `served_name` (default: its model)."""
    from router.server.app import create_app as route_app
    from router.server.protocols.chat import ChatDialect

    name = served_name or backend.model
    chat = ChatDialect(pass_through=_PASSED)

    def health() -> dict[str, Any]:
        facts: dict[str, Any] = {"model": name, "backend": backend.kind}
        if (stats := getattr(backend, "stats", None)) is not None:
            facts["engine"] = stats  # requests done, cancelled, failed; denoising steps run
        return facts

    # vLLM lists exactly the name it serves; `auto` and the alias are this app's own business.
    served = [{"id": name, "object": "model", "created": 0, "owned_by": "local"}]
    return route_app(_router(backend, name), handlers={path: chat for path in _PATHS}, health=health, models=served)


class EngineServer(ThreadedServer):
    """`create_app(backend)` under uvicorn: on a thread (`start`/`stop`, for tests) or blocking (`run`)."""

    def __init__(self, backend: Backend, *, host: str = "127.0.0.1", port: int = 8000, served_name: str | None = None):
        self.backend = backend
        super().__init__(create_app(backend, served_name), host=host, port=port, name="engine-server",
                         timeout_graceful_shutdown=2)
