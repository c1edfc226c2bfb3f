"""The model names `route serve` answers to, and GET /v1/models.

A client may name `auto`, a backend, a consortium, or any name the config's `aliases:` maps to
one of those (exact names first, then globs such as `claude-*`), so an agent that insists on
its own model names (Claude Code, Codex) is routed like any other client.
"""

from __future__ import annotations

import fnmatch
import time
from typing import TYPE_CHECKING, Any

from router.server.errors import ApiError

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["ModelNames"]


class ModelNames(dict[str, str]):
    """Requested model name -> the route name it means (`names[requested]`), and what can be
    requested (`listing`). A dict: exact names resolve with one lookup; a name none matches
    exactly goes through the aliases' globs, or is an ApiError 404 naming the fix."""

    def __init__(self, router: RouterService):
        aliases = dict(router.view.config.aliases)
        self._exact = {k: v for k, v in aliases.items() if not _is_glob(k)}
        self._globs = [(k, v) for k, v in aliases.items() if _is_glob(k)]
        super().__init__({**self._exact, **{name: name for name in router.view.names()}, "auto": "auto"})
        self._router = router

    def resolve(self, requested: str) -> str:
        """The route name for `requested`; ApiError 404 naming the fix when there is none."""
        return self[requested]

    def __missing__(self, requested: str) -> str:
        # Not kept: a client could fill the table with names a glob matches.
        target = next((v for k, v in self._globs if fnmatch.fnmatchcase(requested, k)), None)
        if target is None:
            raise ApiError(404, f"unknown model {requested!r}; GET /v1/models lists `auto`, every backend and every "
                                f"consortium, or map this name in the config: `aliases: {{{requested}: auto}}`",
                           code="model_not_found", param="model")
        return target

    def listing(self) -> list[dict[str, Any]]:
        """`auto`, every backend (kind, capabilities, context window, decoding), every consortium
        and every exact alias, in the OpenAI list format with route's own fields added."""
        created = int(time.time())
        config = self._router.view.config
        models = [{"id": "auto", "object": "model", "created": created, "owned_by": "route",
                   "route": {"kind": "router", "routes_to": [t.name for t in config.routing.tiers]}}]
        for name, spec in config.backends.items():
            caps = self._router.view.backend(name).current_capabilities()
            models.append({"id": name, "object": "model", "created": created, "owned_by": f"route:{spec.kind}",
                           "route": {"kind": spec.kind, "model": spec.model, "capabilities": caps.as_dict(),
                                     "context_window": spec.context_window, "decoding": spec.decoding}})
        for name, consortium in config.consortia.items():
            caps = self._router.view.backend(name).capabilities
            models.append({"id": name, "object": "model", "created": created, "owned_by": "route:consortium",
                           "route": {"kind": "consortium", "judging": consortium.judging,
                                     "capabilities": caps.as_dict(), "decoding": "consortium"}})
        for alias, target in self._exact.items():
            models.append({"id": alias, "object": "model", "created": created, "owned_by": "route:alias",
                           "route": {"kind": "alias", "target": target}})
        return models


def _is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")
