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
    summary: str = ""  # what it calls, for the configuration reference
    needs: str = ""  # the keys a backend of this kind needs, and their defaults


_KINDS: dict[str, Kind] = {
    "openai": Kind("backends.openai_http:OpenAIBackend", params=ChatParams,
                   summary="Any OpenAI-compatible chat-completions API, called directly over HTTP: OpenAI, "
                           "OpenRouter, Groq, Mistral, Inception; vLLM, Ollama, LM Studio, llama.cpp, mlx-vlm, NIM",
                   needs="`model`; `base_url` (default http://127.0.0.1:8000/v1, vLLM's); `api_key: ${NAME}` "
                         "for a hosted API; `price:` (this kind has no price list)"),
    "anthropic": Kind("backends.anthropic_http:AnthropicBackend", params=AnthropicParams,
                      summary="Anthropic's Messages API, called directly over HTTP",
                      needs="`model`; `api_key: ${NAME}`; `base_url` (default https://api.anthropic.com/v1; "
                            "a host without /v1, as `ANTHROPIC_BASE_URL` is written, works too)"),
    "litellm": Kind("backends.litellm_backend:LiteLLMBackend", params=ChatParams,
                    summary="Any provider litellm knows, by its model prefix (gemini/, bedrock/, azure/, "
                            "vertex_ai/, ...); litellm is imported when such a backend is first called",
                    needs="`model` with litellm's prefix; `api_key: ${NAME}` where the provider takes one (or "
                          "the variables litellm reads itself, as AWS_* for Bedrock); `base_url` where the "
                          "provider has one per account (Azure); price: litellm's map unless `price:` is set"),
    "diffusion-local": Kind("backends.diffusion.local:DiffusionLocalBackend", params=DiffusionLocalParams,
                            options=DiffusionLocalOptions,
                            summary="DiffusionGemma in this process, through transformers (the `local` extra)",
                            needs="`model`: a checkpoint directory or a hub id in the local cache; `options:` "
                                  "device, dtype, max_batch, batch_window_ms"),
    "fake": Kind("backends.fake:FakeBackend", summary="A scripted in-process backend, for tests",
                 needs="`model` (any name)"),
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
