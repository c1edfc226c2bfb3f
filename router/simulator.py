"""The SIMULATED model server in this process, for agent code, tests and demos without a model.

    from router import Router, Simulator

    with Simulator() as sim, Router.from_config(sim.config()) as router:
        print(router.complete("Why is the sky blue?").text)  # "[simulated google/diffusiongemma-...] ..."

`Simulator()` is what `route sim` serves -- any model name answered with fake text labelled
SIMULATED, consortium arbiters with well-formed verdicts -- on a free loopback port, on a thread
of this process; it stops when the `with` block ends. `sim.config()` is a config to route with:
the config search order's (or the one given: a path or a dict) with every hosted and local
server backend pointed at the simulator and no key needed, so every tier and consortium answers.
`sim.script(model, replies)`, `sim.set_faults(model, [...])` and `sim.update_profile(model, ...)`
make a model answer with tool calls, fail, or slow down (backends/simulator/runner.py).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from backends.simulator import DEFAULT_PROFILES, SimProfile, SimServer, load_profiles

__all__ = ["Simulator", "backend_name_note", "sim_profiles"]

# Kinds that call a server over HTTP: the simulator answers as an OpenAI-compatible server (and as
# Anthropic's Messages API), so a litellm backend is pointed at it as an OpenAI-compatible one.
_SERVED_KINDS = {"openai": "openai", "anthropic": "anthropic", "litellm": "openai"}


def sim_profiles(source: str | Path | Mapping[str, Any] | None = None) -> dict[str, SimProfile]:
    """The simulator's profiles (the built-in ones, or a file or mapping of them), each also able
    to judge as a consortium arbiter, so a consortium pointed at the simulator gets well-formed
    (simulated) verdicts instead of parse fallbacks."""
    from router.consortium.simulated import judge_when_asked

    respond = judge_when_asked()
    profiles = load_profiles(source) if source is not None else dict(DEFAULT_PROFILES)
    return {name: replace(p, responder=p.responder or respond) for name, p in profiles.items()}


def backend_name_note(what: str, key: str, models: Mapping[str, str]) -> str | None:
    """The mistake of keying the simulator by a backend's name (`models`: backend name -> its
    model): it is sent the model, so that key is never asked for. None when `key` is fine."""
    if key in models.values() or not models.get(key):
        return None
    return f"{what} {key!r} is a backend's name; the simulator is sent its model: key the {what} {models[key]!r}"


class Simulator(SimServer):
    """`route sim` on a free loopback port, in this process (a context manager, sync or async).

    A profile, script, fault or profile update keyed by a backend's name instead of the model
    the backend sends is never used: once `config()` has shown which is which, each such key is
    warned of (UserWarning), as `route sim --profiles` warns."""

    def __init__(self, profiles: str | Path | Mapping[str, Any] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0):
        served = sim_profiles(profiles)
        super().__init__(served, host=host, port=port)
        self._keys: list[tuple[str, str]] = [("profile", k) for k in served] if profiles is not None else []
        self._models: dict[str, str] = {}

    def set_faults(self, model: str, sequence: list[str | None]) -> None:
        self._keyed("fault", model)
        super().set_faults(model, sequence)

    def script(self, model: str, replies: list[Any]) -> None:
        self._keyed("script", model)
        super().script(model, replies)

    def update_profile(self, model: str, **fields: Any) -> dict[str, Any]:
        self._keyed("profile", model)
        return super().update_profile(model, **fields)

    def _keyed(self, what: str, key: str) -> None:
        self._keys.append((what, key))
        self._warn([(what, key)], stacklevel=5)

    def _warn(self, keys: list[tuple[str, str]], stacklevel: int = 4) -> None:
        """Warn at the user's line: `stacklevel` counts this frame, its caller and theirs."""
        import warnings

        for what, key in keys:
            note = backend_name_note(what, key, self._models)
            if note:
                warnings.warn(note, UserWarning, stacklevel=stacklevel - 1)

    def config(self, source: str | Path | dict[str, Any] | None = None) -> dict[str, Any]:
        """The config (the search order's by default) as a dict for `Router.from_config`, with every
        `openai`, `anthropic` and `litellm` backend answered by this simulator, keys dropped."""
        data = copy.deepcopy(source) if isinstance(source, dict) else _read(source)
        backends = data.get("backends") or {}
        self._models = {name: str(b.get("model")) for name, b in backends.items() if isinstance(b, dict) and b.get("model")}
        self._warn(list(dict.fromkeys(self._keys)))
        for backend in backends.values():
            kind = _SERVED_KINDS.get(backend.get("kind"))
            if kind is not None:
                backend.update(kind=kind, base_url=self.base_url)
                backend.pop("api_key", None)
        return data


def _read(source: str | Path | None) -> dict[str, Any]:
    import yaml

    from router.config_loader import _embedded_text, find_config

    path = find_config(source)
    data = yaml.safe_load(path.read_text(encoding="utf-8") if path is not None else _embedded_text())
    return data if isinstance(data, dict) else {}
