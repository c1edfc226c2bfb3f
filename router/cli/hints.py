"""What would help after every backend failed: one hint per failure that a user can act on.

Each hint is for the backend that failed and the way it failed, never a general "connect a model":
a missing key names its variable (the simulator cannot stand in for a hosted API it does not
serve), a local server that refused the connection is the one place where `route sim` helps, a
deadline that ran out asks for more time (connecting another model would not help), and errors
nothing on this side can fix (a bad request, a malformed answer) get no hint at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from backends.errors import AuthError, BackendError, BackendTimeout, BreakerOpen, Unreachable

__all__ = ["failure_hints"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def failure_hints(errors: Iterable[BaseException], backends: Mapping[str, Any],
                  deadline_s: float | None = None) -> list[str]:
    """One line per failed backend that something can be done about (in the order they failed),
    and one for a deadline that ran out. `backends`: the config's backend specs by name."""
    hints: list[str] = []
    seen: set[str] = set()
    timed_out: list[str] = []
    for error in errors:
        if not isinstance(error, BackendError) or error.backend in seen:
            continue
        seen.add(error.backend)
        if isinstance(error, BackendTimeout):
            timed_out.append(error.backend)
            continue
        hint = _hint(error, backends.get(error.backend))
        if hint:
            hints.append(hint)
    if timed_out:
        hints.append(_timeout_hint(timed_out, deadline_s))
    return hints


def _timeout_hint(names: list[str], deadline_s: float | None) -> str:
    if deadline_s is not None:
        return (f"{_names(names)} did not answer within the {deadline_s:g} s deadline: allow more time "
                "(--deadline); `route --explain --deadline ...` shows each backend's predicted time.")
    # a deadline from the config, or a backend's own timeout_s
    return (f"{_names(names)} did not answer in time: allow more (routing.deadline_ms, a tier's deadline_ms or "
            "the backend's timeout_s in the config); `route --explain` shows each backend's predicted time.")


def _hint(error: BackendError, spec: Any) -> str | None:
    name = error.backend
    if isinstance(error, AuthError):
        return _key_hint(name, spec)
    if isinstance(error, BreakerOpen):
        return (f"{name} failed several times in a row, so it is skipped until its breaker's cooldown ends; "
                f"`route doctor` checks it now.")
    if isinstance(error, Unreachable):
        return _unreachable_hint(name, spec)
    return None  # a rate limit says when to retry; a bad request or answer is not fixed from here


def _key_hint(name: str, spec: Any) -> str:
    variable = getattr(spec, "api_key_env", None)
    if variable and not os.environ.get(variable):
        from backends.env_names import set_lookalike

        other = set_lookalike(variable)
        if other:
            return (f"{name} reads its key from ${variable}, which is not set, but ${other} is: if that is the key, "
                    f"write `api_key: ${{{other}}}` in the config (or `export {variable}=\"${other}\"`).")
        return (f"{name} needs an API key: `export {variable}=...`. `route sim` cannot stand in for it (it calls "
                f"{_provider(spec)}); without a key, use a backend that is ready (`route models`) or leave {name} "
                "out of your config (`route init` writes one with the backends you pick).")
    where = f" in ${variable}" if variable else ""
    return f"{name} refused the API key{where}: check that it is valid and allowed to use {getattr(spec, 'model', name)}."


def _provider(spec: Any) -> str:
    """Where a hosted backend's calls go, for a person: its host, else its provider's name."""
    host = urlsplit(getattr(spec, "base_url", None) or "").hostname
    if host:
        return host
    kind, model = getattr(spec, "kind", ""), str(getattr(spec, "model", ""))
    if kind == "anthropic":
        return "api.anthropic.com"
    return f"{model.split('/')[0]}'s API" if "/" in model else "its provider's API"


def _unreachable_hint(name: str, spec: Any) -> str:
    base_url = getattr(spec, "base_url", None) or ""
    parts = urlsplit(base_url)
    if parts.hostname not in _LOOPBACK:
        return f"{name} cannot be reached at {base_url or 'its provider'}: check the network and the backend's base_url."
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return (f"nothing listens at {base_url} for {name}: start its server there (vLLM, llama.cpp, "
            f"`route engine serve`), or run `route sim --port {port}` in another terminal for a SIMULATED one.")


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
