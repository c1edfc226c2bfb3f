"""`route serve`'s client keys: several at once, each read from the environment, each with its
own `rpm` / `tpm` (config `server.keys`), besides the one key `--api-key-env` names.

    server:
      keys:
        alice: {key: "${ALICE_ROUTE_KEY}", rpm: 60, tpm: 200000}
        ci:    {key: "${CI_ROUTE_KEY}", rpm: 10}

A key is known by its name everywhere (buckets, messages, logs); the key itself stays in memory
only. The auth middleware (auth.py) puts the name of the key a request presented in its scope;
`KeyLimits` then takes one request from that key's buckets before the request is read or routed
(a refusal is a 429 with Retry-After in the path's API shape) and, once the answer is out,
charges its tpm with the tokens it used. So tpm is paid after the fact: a key is refused while
it is in debt, and may overshoot by at most the one request that took it there.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backends.errors import ConfigError
from router.server.errors import ApiError
from router.server.protocols import is_gemini
from router.server.runner import api_key_from_env

if TYPE_CHECKING:
    from router.config_loader import LoadedConfig
    from router.decision import Outcome
    from router.state.rate_limits import RateLimiter

__all__ = ["KEY_SCOPE", "KeyLimits", "record_key_usage", "server_keys"]

KEY_SCOPE = "route.api_key"  # the ASGI scope entry holding the name of the key a request presented
_MODEL_CALLS = frozenset(f"{prefix}/{path}" for prefix in ("/v1", "")
                         for path in ("chat/completions", "messages", "responses"))
_GEMINI_CALLS = (":generateContent", ":streamGenerateContent")  # the model is in Gemini's path
_MIN_KEY_CHARS = 16

# Tokens the routed requests of the current HTTP request used, for its key's tpm.
_USAGE: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("route_key_usage", default=None)


def server_keys(loaded: LoadedConfig, host: str, api_key_env: str | None) -> dict[str, str]:
    """Key name -> the key itself, from the environment: `--api-key-env` (named after its
    variable) and every `server.keys` entry. None at all is refused beyond loopback."""
    keys: dict[str, str] = {}
    if api_key_env:
        keys[api_key_env] = api_key_from_env(host, api_key_env) or ""
    for name, spec in loaded.config.server.keys.items():
        value = os.environ.get(spec.env, "")
        line = loaded.line_of("server", "keys", name, "key")
        if not value.strip():
            raise ConfigError(f"server.keys.{name} reads its key from ${{{spec.env}}}, which is not set or empty; "
                              f"export {spec.env} with the key that client sends (e.g. `openssl rand -hex 32`), or "
                              "remove the entry.", path=loaded.path, line=line)
        if len(value) < _MIN_KEY_CHARS:
            raise ConfigError(f"the key in {spec.env} (server.keys.{name}) is shorter than {_MIN_KEY_CHARS} "
                              "characters; use a long random one, e.g. `openssl rand -hex 32`.", path=loaded.path, line=line)
        if value in keys.values():
            raise ConfigError(f"server.keys.{name} holds the same key as another entry (or --api-key-env); give "
                              "each client its own key, so each has its own limits.", path=loaded.path, line=line)
        keys[name] = value
    if not keys:
        api_key_from_env(host, None)  # refuses a host beyond loopback without any key
    return keys


def _model_call(path: str) -> bool:
    return path in _MODEL_CALLS or (path.endswith(_GEMINI_CALLS) and is_gemini(path))


def record_key_usage(outcome: Outcome) -> None:
    """A request observer: the tokens a routed request used, for the key that sent it."""
    usage = _USAGE.get()
    if usage is not None and outcome.result is not None:
        u = outcome.result.completion.usage
        usage.append(u.input_tokens + u.output_tokens)


class KeyLimits:
    """Pure ASGI middleware, inside the auth middleware: per-key rate limits on model calls."""

    def __init__(self, app: Any, limiter: RateLimiter, refused: Callable[[str, str], None] | None = None):
        self.app = app
        self.limiter = limiter
        self.refused = refused  # told of each request turned away: /metrics counts them

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        name = scope.get(KEY_SCOPE)
        if (scope["type"] != "http" or name is None or not _model_call(scope["path"])
                or self.limiter.limits_of(name, "key") is None):
            await self.app(scope, receive, send)
            return
        refused = await self.limiter.take(name, 0, kind="key")
        if refused is not None:
            if self.refused is not None:
                self.refused("key", name)
            from router.server.auth import send_error_for

            await send_error_for(scope, send, ApiError(
                429, f"API key {name!r} is {refused.describe()}; nothing was routed. Retry after "
                     f"{refused.retry_after_s} s, or ask for higher limits (server.keys.{name}.rpm / tpm).",
                kind="rate_limit_error", code="rate_limit_exceeded",
                headers={"retry-after": str(refused.retry_after_s)}))
            return
        usage: list[int] = []
        token = _USAGE.set(usage)
        try:
            await self.app(scope, receive, send)
        finally:
            _USAGE.reset(token)
        if usage:
            await self.limiter.settle(name, 0, sum(usage), kind="key")
