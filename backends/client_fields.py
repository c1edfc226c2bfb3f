"""Which of a client's fields a backend may take, by one rule for every kind and entry point.

- **Where a request goes and with which credential is the operator's.** Endpoints, keys,
  headers, provider and deployment selection, callbacks and custom prices (`api_base`,
  `base_url`, `api_key`, `extra_headers`, `custom_llm_provider`, `aws_*`, `vertex_*`, ...) are
  what litellm and OpenAI-compatible proxies read from a request body to route it: a LiteLLM
  proxy that allows client-side credentials sends its provider key wherever `api_base` points.
  A client never sets them: the server and the Python API refuse them by name
  (`refusal`), and every kind leaves them out of what it sends (backends/openai_http.py;
  the other kinds send only fields they know). Names are compared as a proxy reads them,
  whatever their case and separators (`baseURL`, `BASE_URL`, `base-url` are `base_url`),
  at the top and inside the objects a LiteLLM proxy reads settings from (`metadata.api_base`);
  a LiteLLM proxy's own list of such fields is covered (backends/litellm_owned.py).
- **What the config sets, the config decides.** A backend's `params:` and `passthrough:`
  replace a client's value of the same field (`settled`, applied last), unless the
  backend's `client_params:` names the field: then the configured value is a default the
  client may change. Aliases go with their field (`max_tokens` also rules
  `max_completion_tokens`).
- **A field that raises the price is refused.** `service_tier: priority` (or `scale`, in any
  case) bills above the price the router counts; the tiers that cost no more (`auto`,
  `default`, `flex`, `standard_only`) pass. An operator who wants priority sets it in
  `passthrough:` with the price it costs. A beta that changes the price (`context-1m-...`:
  input past 200k tokens at twice the price, output at 1.5x), in the body's `anthropic_beta`
  or the `anthropic-beta` header, goes only to a kind whose cost counts it (backends/prices.py:
  the anthropic kind); the kind that cannot count it (litellm) refuses it (`beta_refusal`),
  and the openai kind never sends Anthropic's betas.
- **`anthropic_beta` is a list of feature names**, as the header it becomes requires.

Pure functions on plain data.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from backends.litellm_owned import LITELLM_OWNED, LITELLM_OWNED_PATTERN
from backends.types import Request

__all__ = ["ALIASES", "FREE_TIERS", "OPERATOR_FIELDS", "PRICED_BETAS", "PRICED_TIERS", "beta_names", "beta_refusal",
           "not_the_clients", "operator_field", "operator_owned", "refusal", "settled"]

# Read by litellm's completion() or a LiteLLM / OpenAI-compatible proxy to choose the endpoint,
# the provider, the deployment or the credential, to call back elsewhere, or to price the call.
OPERATOR_FIELDS = frozenset({
    "api_base", "base_url", "api_version", "api_type", "url", "endpoint", "api_key", "organization", "project",
    "custom_llm_provider", "model_list", "deployment_id", "deployment", "user_config", "litellm_params",
    "region_name", "extra_headers", "headers", "default_headers", "extra_query", "default_query", "extra_body",
    "http_client", "client", "callbacks", "success_callback", "failure_callback", "input_callback", "logger_fn",
    "mock_response", "mock_tool_calls", "mock_timeout", "base_model", "hf_model_name", "fallbacks",
    "context_window_fallback_dict", "context_window_fallbacks", "num_retries", "max_retries",
    "input_cost_per_token", "output_cost_per_token", "input_cost_per_second", "output_cost_per_second",
    "tenant_id", "client_id", "client_secret", "azure_ad_token", "azure_ad_token_provider",
})
# Credentials and cloud-provider settings under any name litellm gives them.
_OPERATOR_PATTERN = re.compile(
    r"^(?:aws|azure|vertex|vertex_ai|gcp|google|watsonx|oci|databricks|sagemaker|bedrock|snowflake)_"
    r"|(?:^|_)(?:api_?key|api_?base|secret|password|credentials?|access_?token|session_?token|ad_?token)$",
    re.IGNORECASE)
# Every such name, and each without its separators (`baseurl`, `apikey`): how a name is compared.
_OWNED = OPERATOR_FIELDS | LITELLM_OWNED
_OWNED_COMPACT = frozenset(name.replace("_", "") for name in _OWNED)
# Objects whose keys a LiteLLM proxy reads as settings, as it reads the body's own.
_NESTED = frozenset({"metadata", "litellm_metadata", "extra_body", "litellm_embedding_config"})
# service_tier values billed above the standard price (OpenAI's priority and scale tiers), and the
# ones that are not: any other value is refused too, compared in any case.
PRICED_TIERS = frozenset({"priority", "scale"})
FREE_TIERS = frozenset({"auto", "default", "flex", "standard", "standard_only"})
# Beta features (by prefix) that change the price: a kind sends one only where its cost counts it.
PRICED_BETAS = ("context-1m-",)
# A configured field rules its aliases too: a client's `max_completion_tokens` would otherwise
# replace a configured `max_tokens` at the upstream, which reads either.
ALIASES: Mapping[str, tuple[str, ...]] = {
    "max_tokens": ("max_completion_tokens", "max_output_tokens"),
    "max_completion_tokens": ("max_tokens", "max_output_tokens"),
    "stop": ("stop_sequences",),
    "stop_sequences": ("stop",),
}
_BETA = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


@functools.lru_cache(maxsize=1024)  # a client sends the same few names on every request; bounded: any name may come
def operator_owned(name: str) -> bool:
    """Whether a field named `name` (in any case, with any separators) decides where a request
    goes, with which credential, where it is logged or what it costs."""
    snake = _SEPARATORS.sub("_", _CAMEL.sub("_", name)).strip("_").lower()
    return (snake in _OWNED or snake.replace("_", "") in _OWNED_COMPACT or _OPERATOR_PATTERN.search(snake) is not None
            or LITELLM_OWNED_PATTERN.search(snake) is not None)


def operator_field(fields: Mapping[str, Any]) -> str | None:
    """The first of `fields` that is the operator's (`metadata.api_base` for one inside an
    object a proxy reads settings from); None when there is none."""
    for key, value in fields.items():
        if operator_owned(key):
            return key
        if isinstance(value, Mapping) and _SEPARATORS.sub("_", key).lower() in _NESTED:
            inner = next((name for name in value if isinstance(name, str) and operator_owned(name)), None)
            if inner is not None:
                return f"{key}.{inner}"
    return None


def openai_shaped(payload: dict[str, Any], request: Request, operator: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped `payload` (the client's fields over the config's) with the request's own
    sampling settings, then the operator's values over all of it (`settled`)."""
    # A client that wrote max_completion_tokens (OpenAI's reasoning models refuse max_tokens) keeps it.
    if request.max_tokens is not None and "max_completion_tokens" not in payload:
        payload["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        payload["temperature"] = request.temperature
    if request.stop:
        payload["stop"] = request.stop
    return settled(payload, operator)


def settled(payload: dict[str, Any], operator: Mapping[str, Any]) -> dict[str, Any]:
    """`payload` with the operator's values put back over whatever a client's fields (or their
    translation) set, and the client's aliases of those fields taken out."""
    for key in operator:
        for alias in ALIASES.get(key, ()):
            if alias not in operator:
                payload.pop(alias, None)
    payload.update(operator)
    return payload


def not_the_clients(key: str) -> str:
    """Why a client may not send the operator's field `key`."""
    return (f"`{key}` is not a client's to set: where a request goes and with which credential (endpoints, "
            "keys, headers, provider) come from the backend's config only; remove it from the request")


def beta_names(value: Any) -> list[str]:
    """The well-formed beta feature names of a request's `anthropic_beta` (what a backend puts in
    the `anthropic-beta` header; anything else was refused where the request came in)."""
    if not isinstance(value, list):
        return []
    return [b for b in value if isinstance(b, str) and _BETA.match(b)]


def refusal(extra: Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, why) for the first field of a client's `extra` that may not be sent; None when
    every one may. `why` is one sentence that names the field and says what to do instead."""
    owned = operator_field(extra)
    if owned is not None:
        return owned, not_the_clients(owned)
    tier = extra.get("service_tier")
    if tier is not None and (not isinstance(tier, str) or tier.strip().lower() not in FREE_TIERS):
        return "service_tier", (f"`service_tier` {tier!r} is billed above the price this router counts; send "
                                "auto, default, flex or standard_only, or leave it out (an operator who wants "
                                "priority sets it in the backend's passthrough, with its price)")
    betas = extra.get("anthropic_beta")
    if betas is not None and (not isinstance(betas, list) or len(beta_names(betas)) != len(betas)):
        return "anthropic_beta", ("`anthropic_beta` must be a list of beta feature names (letters, digits, '.', "
                                  "'_', '-'), e.g. [\"interleaved-thinking-2025-05-14\"]")
    return None


def beta_refusal(betas: Iterable[str], counted: tuple[str, ...] = ()) -> str | None:
    """Why the first of `betas` that changes the price, and is not among the ones `counted` (by
    prefix) by the backend's cost, may not be sent to it; None when there is none."""
    priced = next((b for b in betas if b.lower().startswith(PRICED_BETAS)
                   and not (counted and b.lower().startswith(counted))), None)
    if priced is None:
        return None
    return (f"the beta {priced!r} is billed above the price this backend counts (past 200k input tokens, input at "
            "twice the price and output at 1.5x); leave it out (Claude Code: choose the model without [1m]), or "
            "ask the operator for an anthropic-kind backend, which counts it")
