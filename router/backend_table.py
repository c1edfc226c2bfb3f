"""The backends and consortia of one config, each built on first use.

A consortium's members and arbiter resolve through the same table (so a member that is a
consortium nests) and call through the one call path, which itself resolves backends through
this table: the table makes its call path at construction, handing it its own lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from backends import build_backend
from backends.base import Backend
from backends.errors import UsageError
from router.config_loader import _did_you_mean

if TYPE_CHECKING:
    from router.calls import CallPath
    from router.config import Config

__all__ = ["BackendTable", "backend_identity"]


def backend_identity(config: Config, name: str) -> str:
    """What a backend is, as a key for what is learned about it (latency, breakers, sessions):
    its name with its kind, endpoint and model, so that two configs reusing a name for
    different backends do not share a history."""
    import hashlib

    spec = config.backends.get(name)
    if spec is None:  # a consortium: its name is all it is
        return name
    what = f"{spec.kind}\0{spec.base_url or ''}\0{spec.model}"
    return f"{name}#{hashlib.blake2b(what.encode(), digest_size=6).hexdigest()}"


class BackendTable:
    """Every backend and consortium of one config by name: `table[name]` builds one on first use
    (UsageError for a name the config does not have); `built` holds those built so far."""

    def __init__(self, config: Config, call_path: Callable[[Callable[[str], Backend]], CallPath],
                 prebuilt: Mapping[str, Backend] | None = None):
        self.config = config
        self.built = _Built(self, prebuilt or {})
        # Consortia call their members and arbiter through it; it finds every backend here, with
        # a plain dict lookup (a name is built on its first).
        self.calls = call_path(self.built.__getitem__)
        # The built backends that keep a queue of their own (router/queueing.py): the in-process
        # engine. Empty for every other kind, so deciding reads no queue at all.
        self.queued: dict[str, Backend] = {n: b for n, b in self.built.items() if _keeps_queue(b)}

    def names(self) -> list[str]:
        """Every name usable as `model`: backends, then consortia."""
        return [*self.config.backends, *self.config.consortia]

    def knows(self, name: str) -> bool:
        return name in self.config.backends or name in self.config.consortia or name in self.built

    def unknown(self, name: str) -> UsageError:
        return UsageError(f"unknown model {name!r}.{_did_you_mean(name, self.names())} "
                          f"Configured names: {', '.join(self.names())}. Run `route models` to list them.")

    def get(self, name: str) -> Backend:
        """The backend (or consortium) called `name`, built on first use."""
        return self.built[name]

    def _build(self, name: str) -> Backend:
        if name in self.config.backends:
            spec = self.config.backends[name]
            backend = build_backend(spec.kind, spec.settings(name))
        elif name in self.config.consortia:
            from router.consortium.consortium import Consortium

            backend = Consortium(name, self.config.consortia[name], resolve=self.get, calls=self.calls)
        else:
            raise self.unknown(name)
        if _keeps_queue(backend):
            self.queued[name] = backend
        return backend

    async def aclose(self) -> None:
        for backend in self.built.values():
            await backend.aclose()


class _Built(dict[str, Backend]):
    """Name -> backend, built on the first lookup of a name (`built[name]`; `built.get(name)`
    only looks): every call resolves its backend through here, with a dict lookup."""

    def __init__(self, table: BackendTable, prebuilt: Mapping[str, Backend]):
        super().__init__(prebuilt)
        self._table = table

    def __missing__(self, name: str) -> Backend:
        backend = self[name] = self._table._build(name)
        return backend


def _keeps_queue(backend: Backend) -> bool:
    return callable(getattr(backend, "queue_state", None))
