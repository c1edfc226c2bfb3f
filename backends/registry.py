"""Backend kinds register here, in one place; config's `kind:` is checked against this registry.

A kind maps to its class (or a lazy "module:Class" reference, so heavy libraries load only when
such a backend is built) and to the schemas of its `params:` and `options:`. A kind defined
outside the package -- a test's toy backend, a plugin -- registers with `register_kind`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from backends.errors import ConfigError
from backends.params import AnthropicParams, ChatParams, DiffusionLocalOptions, DiffusionLocalParams, NoOptions

if TYPE_CHECKING:
    from backends.base import Backend, BackendSettings

__all__ = ["Kind", "backend_class", "build_backend", "kind_of", "kinds", "register_kind"]


@dataclass(frozen=True)
class Kind:
    target: str | type[Backend]  # "module:Class", imported on first use
    params: type[BaseModel] = NoOptions
    options: type[BaseModel] = NoOptions


_KINDS: dict[str, Kind] = {
    "openai": Kind("backends.openai_http:OpenAIBackend", params=ChatParams),
    "anthropic": Kind("backends.anthropic_http:AnthropicBackend", params=AnthropicParams),
    "litellm": Kind("backends.litellm_backend:LiteLLMBackend", params=ChatParams),
    "diffusion-local": Kind("backends.diffusion.local:DiffusionLocalBackend", params=DiffusionLocalParams,
                            options=DiffusionLocalOptions),
    "fake": Kind("backends.fake:FakeBackend"),
}


def register_kind(name: str, backend: type[Backend], *, params: type[BaseModel] | None = None,
                  options: type[BaseModel] | None = None) -> None:
    """Make `kind: name` usable in config. The schemas default to the class's `params_model` /
    `options_model`."""
    _KINDS[name] = Kind(backend, params=params or backend.params_model, options=options or backend.options_model)


def kinds() -> list[str]:
    return list(_KINDS)


def kind_of(name: str) -> Kind:
    try:
        return _KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown backend kind {name!r}; use one of: {', '.join(_KINDS)}") from None


def backend_class(name: str) -> type[Backend]:
    target = kind_of(name).target
    if not isinstance(target, str):
        return target
    module_name, class_name = target.split(":")
    cls: type[Backend] = getattr(importlib.import_module(module_name), class_name)
    return cls


def build_backend(kind: str, settings: BackendSettings) -> Backend:
    return backend_class(kind)(settings)
