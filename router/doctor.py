"""Health checks for `route doctor`: is each backend's key present and its server reachable?"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any

from router.config import BackendConfig, Config

__all__ = ["Check", "check_all", "check_backend", "not_served_hint"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def check_backend(name: str, spec: BackendConfig, *, timeout_s: float) -> Check:
    env = spec.api_key_env
    if env and not os.environ.get(env):
        return Check(name, False, f"${env} is not set: export it with the API key for {spec.model}")
    if spec.kind == "openai":
        return _check_openai(name, spec, timeout_s)
    if spec.kind == "litellm":
        where = f" at {spec.base_url}" if spec.base_url else ""
        note = "key present" if env else "no key configured"
        return Check(name, True, f"litellm model {spec.model}{where} ({note}; not called, to spend nothing)")
    if spec.kind == "diffusion-local":
        return _check_local(name, spec)
    return Check(name, True, f"{spec.kind} backend")


def _check_openai(name: str, spec: BackendConfig, timeout_s: float) -> Check:
    import httpx

    base = (spec.base_url or "http://127.0.0.1:8000/v1").rstrip("/")
    headers = {"Authorization": f"Bearer {os.environ[spec.api_key_env]}"} if spec.api_key_env else {}
    try:
        response = httpx.get(f"{base}/models", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return Check(name, False, f"cannot reach {base} ({type(exc).__name__}); is the server running?")
    if response.status_code in (401, 403):
        return Check(name, False, f"{base} refused the key (HTTP {response.status_code})")
    if response.status_code >= 400:
        return Check(name, False, f"{base}/models answered HTTP {response.status_code}")
    simulated = " [SIMULATED]" if response.headers.get("x-simulated") == "true" else ""
    served = _served_models(response)
    if served and spec.model not in served:
        problem = f"{base} does not serve {spec.model!r}; {not_served_hint(spec.model, served)}"
        if response.headers.get("x-sim-any-model") == "true":
            # The lenient simulator answers every name; a real server (vLLM) would answer 404.
            return Check(name, True, f"reachable at {base}{simulated}, which answers any name, but {problem}")
        return Check(name, False, problem)
    return Check(name, True, f"reachable at {base}{simulated}")


def not_served_hint(model: str, served: list[str]) -> str:
    """Which names a server does serve, led by a case-insensitive (then fuzzy) did-you-mean.

    vLLM serves exactly the name it was started with and answers any other with 404, so
    `google/diffusiongemma-26b-a4b-it` fails against `vllm serve google/diffusiongemma-26B-A4B-it`.
    """
    same = [s for s in served if s.casefold() == model.casefold()]
    close = same or difflib.get_close_matches(model, served, n=1, cutoff=0.6)
    listed = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
    mean = f"did you mean {close[0]!r}? (set the backend's `model:` to it) " if close else ""
    return f"{mean}it serves: {listed}"


def _served_models(response: Any) -> list[str]:
    try:
        data = response.json().get("data", [])
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
    except (ValueError, AttributeError, TypeError):
        return []


def _check_local(name: str, spec: BackendConfig) -> Check:
    from importlib.util import find_spec

    missing = [m for m in ("torch", "transformers") if find_spec(m) is None]
    if missing:
        return Check(name, False, f"needs {' and '.join(missing)}: pip install torch==2.13.0 (the CPU build; a bare "
                                  "`torch` pulls a CUDA build), then pip install 'latency-router[local]'")
    from backends.diffusion.load import EngineSetupError, read_config

    try:  # config.json only: checks the path and the model type without loading weights
        config = read_config(spec.model)
    except EngineSetupError as exc:
        return Check(name, False, str(exc))
    return Check(name, True, f"DiffusionGemma checkpoint at {spec.model} (canvas {config.canvas_length}; "
                             "weights load on first use)")


def check_all(config: Config, *, timeout_s: float = 3.0) -> list[Check]:
    """Every backend, then every consortium (from its backends' checks: no second call)."""
    backends = {name: check_backend(name, spec, timeout_s=timeout_s) for name, spec in config.backends.items()}
    consortia = [check_consortium(name, config, backends) for name in config.consortia]
    return [*backends.values(), *consortia]


def check_consortium(name: str, config: Config, backends: dict[str, Check]) -> Check:
    """A consortium whose arbiter cannot answer still answers, unjudged: say so before it happens.
    Members are fine while the quorum can still be met. Nested consortia are checked the same way."""
    def can_answer(member: str) -> Check:
        return backends[member] if member in backends else check_consortium(member, config, backends)

    spec = config.consortia[name]
    arbiter = can_answer(spec.arbiter)
    if not arbiter.ok:
        return Check(name, False, f"arbiter {spec.arbiter} cannot answer ({arbiter.detail}); answers would be "
                                  "unjudged member answers")
    members = [m.model for m in spec.members for _ in range(m.n)]
    up = sum(can_answer(m).ok for m in members)
    need = spec.quorum or 1  # without a quorum, one answer is enough (consortium.py)
    if up < need:
        return Check(name, False, f"only {up} of {len(members)} member calls can be made; it needs {need}")
    return Check(name, True, f"{len(members)} member calls, arbiter {spec.arbiter}")
