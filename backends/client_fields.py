"""Which of a client's fields a backend may take, by one rule for every kind and entry point.

- **Where a request goes and with which credential is the operator's.** Endpoints, keys,
  headers, provider and deployment selection, callbacks and custom prices (`api_base`,
  `base_url`, `api_key`, `extra_headers`, `custom_llm_provider`, `aws_*`, `vertex_*`, ...) are
  what litellm and OpenAI-compatible proxies read from a request body to route it: a LiteLLM
  proxy that allows client-side credentials sends its provider key wherever `api_base` points.
  A client never sets them: the server and the Python API refuse them by name
  (`refusal`), and every kind leaves them out of what it sends (backends/openai_fields.py;
  the other kinds send only fields they know).
- **What the config sets, the config decides.** A backend's `params:` and `passthrough:`
  replace a client's value of the same field (`settled`, applied last), unless the
  backend's `client_params:` names the field: then the configured value is a default the
  client may change. Aliases go with their field (`max_tokens` also rules
  `max_completion_tokens`).
- **A field that raises the price is refused.** `service_tier: priority` (or `scale`) bills
  above the price the router counts; the tiers that cost no more (`auto`, `default`, `flex`,
  `standard_only`) pass. An operator who wants priority sets it in `passthrough:` with the
  price it costs.
- **`anthropic_beta` is a list of feature names**, as the header it becomes requires.

Pure functions on plain data; no project imports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from backends.types import Request

__all__ = ["ALIASES", "OPERATOR_FIELDS", "PRICED_TIERS", "beta_names", "not_the_clients", "operator_owned", "refusal",
           "settled"]

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
# service_tier values billed above the standard price (OpenAI's priority and scale tiers).
PRICED_TIERS = frozenset({"priority", "scale"})
# A configured field rules its aliases too: a client's `max_completion_tokens` would otherwise
# replace a configured `max_tokens` at the upstream, which reads either.
ALIASES: Mapping[str, tuple[str, ...]] = {
    "max_tokens": ("max_completion_tokens", "max_output_tokens"),
    "max_completion_tokens": ("max_tokens", "max_output_tokens"),
    "stop": ("stop_sequences",),
    "stop_sequences": ("stop",),
}
_BETA = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@functools.lru_cache(maxsize=1024)  # a client sends the same few names on every request; bounded: any name may come
def operator_owned(name: str) -> bool:
    """Whether a field named `name` decides where a request goes or with which credential."""
    return name in OPERATOR_FIELDS or _OPERATOR_PATTERN.search(name) is not None


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
    for key in extra:
        if operator_owned(key):
            return key, not_the_clients(key)
    tier = extra.get("service_tier")
    if tier is not None and (not isinstance(tier, str) or tier in PRICED_TIERS):
        return "service_tier", (f"`service_tier` {tier!r} is billed above the price this router counts; send "
                                "auto, default, flex or standard_only, or leave it out (an operator who wants "
                                "priority sets it in the backend's passthrough, with its price)")
    betas = extra.get("anthropic_beta")
    if betas is not None and (not isinstance(betas, list) or len(beta_names(betas)) != len(betas)):
        return "anthropic_beta", ("`anthropic_beta` must be a list of beta feature names (letters, digits, '.', "
                                  "'_', '-'), e.g. [\"interleaved-thinking-2025-05-14\"]")
    return None
