"""Requests a simulated model refuses, the way providers refuse them: a profile's `refuses`
names request fields (a top-level key, a key of any message, or `anthropic-beta` for the header
of a /v1/messages request), and a request carrying one is answered as its provider answers:

    provider       /v1/chat/completions: 400 in OpenAI's shape, naming the field in `param`
                   ("Unrecognized request argument supplied: top_p");
                   /v1/messages: 400 in Anthropic's shape ("top_p: Extra inputs are not
                   permitted"; an unknown beta: "Unexpected value(s) `x` for the
                   `anthropic-beta` header")
    litellm-proxy  either path: 401 "Authentication Error, Rejected Request: api_base is not
                   allowed in request body", as a LiteLLM proxy refuses fields a client may
                   not set (litellm/proxy/auth/auth_utils.py)

For testing that a refused request is the request's fault, never the backend's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = ["REFUSAL_STYLES", "Refusal", "refused_field", "refusal_body"]

Refusal = Literal["provider", "litellm-proxy"]
REFUSAL_STYLES = frozenset({"provider", "litellm-proxy"})
_BETA = "anthropic-beta"


def refused_field(refuses: Iterable[str], body: Mapping[str, Any], headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The first field of `refuses` the request carries, or None."""
    carried = set(body) | _message_keys(body.get("messages"))
    if any(name.lower() == _BETA.encode() for name, _ in headers):
        carried.add(_BETA)
    return next((field for field in refuses if field in carried), None)


def _message_keys(messages: object) -> set[str]:
    if not isinstance(messages, list):
        return set()
    return {key for m in messages if isinstance(m, Mapping) for key in m}


def refusal_body(field: str, style: Refusal, *, anthropic: bool, headers: Iterable[tuple[bytes, bytes]] = ()
                 ) -> tuple[int, dict[str, Any]]:
    """The status and body the provider (or proxy) answers a request carrying `field` with."""
    if style == "litellm-proxy":
        message = (f"Authentication Error, Rejected Request: {field} is not allowed in request body. Clientside "
                   "passthrough requires explicit admin opt-in via either `general_settings.allow_client_side_"
                   "credentials = true` (proxy-wide) or `configurable_clientside_auth_params` on the deployment in "
                   "your proxy config.yaml.")
        return 401, {"error": {"message": message, "type": "auth_error", "param": "None", "code": "401"}}
    if not anthropic:
        return 400, {"error": {"message": f"Unrecognized request argument supplied: {field}",
                               "type": "invalid_request_error", "param": field, "code": None}}
    if field == _BETA:
        sent = ",".join(v.decode("latin-1") for k, v in headers if k.lower() == _BETA.encode())
        message = (f"Unexpected value(s) `{sent}` for the `anthropic-beta` header. Please consult our documentation "
                   "at docs.anthropic.com or try again without the header.")
    else:
        message = f"{field}: Extra inputs are not permitted"
    return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
