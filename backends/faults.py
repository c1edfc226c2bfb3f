"""Whose fault an upstream's answer is: the one mapping every backend kind (openai, anthropic,
litellm, diffusion-local, and consortia through their members) and every protocol (chat,
Messages, Responses) uses. The class decides what follows; `fault` is each class's, in
backends/errors.py.

    what the upstream said, or this kind found    class (fault)                  what follows
    --------------------------------------------  -----------------------------  ---------------------------------
    400, 413, 422, 451; an error event of type    BadRequest (request)           a 400 to the client in its own
    invalid_request_error; context too long;                                     protocol, naming the field when
    content policy; a thinking block refused                                     the upstream did; never retried;
    (`refuses_thinking`); a 404 naming a field;                                  no breaker, no latency sample;
    a value this kind cannot write                                               no other backend of the same
    (`anthropic_beta: 5`, a line break in a                                      shape is tried (below)
    header); a library that fails writing the
    request before sending it; a LiteLLM
    proxy's "Rejected Request: <field> ..."
    401, 402, 403, 407; a key that is not set;    AuthError (credential)         the next backend is tried (it may
    429 `insufficient_quota`                                                     hold another key: with no
                                                                                 ANTHROPIC_API_KEY a weaker tier
                                                                                 answers, and says so); never
                                                                                 retried; no breaker, no latency
    5xx (529 too), 408, 409; timeouts; refused    BackendUnavailable, Timeout,   retried if it is a blip's (calls.py);
    connections (Unreachable, not retried);       Unreachable, Malformed,        breaker, latency, failover; a 503
    answers that do not parse; 404, 405, 410      NotServed (backend)            with Retry-After
    naming no field (NotServed: the config
    points at nothing there; not retried)
    429                                           RateLimited (pressure)         retried after its Retry-After;
                                                                                 breaker, failover; a 429

A refused thinking block (`refuses_thinking`) is the request's fault like any other refused
field: a signed block only the model that wrote it can read, sent where it cannot be verified
(another model, another provider, an edited block). What to do about it -- resend without the
signed blocks, or go to the backend that signed them -- is the sessions' business; here it is only
never the backend's failure, so it moves no breaker and is never a silent downgrade.

A different shape. A request one backend refused is not sent to another that would write it the
same way: the same `Backend.shape` (router/calls.py asks it), which is the kind and the dialect
it writes -- `openai` to OpenAI's own API (only its schema's fields) or to any other
OpenAI-compatible server (every field the client sent), `anthropic`, `litellm` per provider
(`anthropic/...` and `openai/...` are written differently), `diffusion-local`, a consortium by
name. A backend of another shape drops or translates the refused field, so it may take the
request: the router tries it (router/execution.py).

What clients are told of an upstream's error is its own message, scrubbed here once for every
kind: no Python traceback, no server path, one line, at most 300 characters. (Keys are the
redactor's: router/redaction.py; upstream addresses the server's: router/server/endpoint.py.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from backends.errors import (
    AuthError,
    BackendError,
    BackendUnavailable,
    BadRequest,
    Fault,
    NotServed,
    RateLimited,
    Where,
)
from backends.http_errors import parse_retry_after

__all__ = ["Detail", "client_header", "detail_of", "error_for_status", "failed_writing", "field_named", "refused",
           "refuses_thinking", "scrub", "stream_error"]

_BODY_LIMIT = 2000  # characters of an error body kept on the error (never shown whole)
_SHOWN = 300  # characters of an upstream's message a client is shown

_CREDENTIAL = frozenset({401, 402, 403, 407})
_NOT_THERE = frozenset({404, 405, 410})  # the config's URL or model, unless the body names a field

# Error `type`s providers put in bodies and stream events, by whose fault they are.
_REQUEST_TYPES = frozenset({"invalid_request_error", "request_too_large", "not_found_error_for_field"})
_CREDENTIAL_TYPES = frozenset({"authentication_error", "permission_error", "billing_error"})
_PRESSURE_TYPES = frozenset({"rate_limit_error"})

# A LiteLLM proxy refusing a field a client may not set: 401 "Authentication Error, Rejected
# Request: api_base is not allowed in request body. ..." (litellm/proxy/auth/auth_utils.py).
_REJECTED = re.compile(r"Rejected Request: `?([\w.\-\[\]]+)`? (?:is not allowed|holds a secret)")
# Where a message names its field, when the body's `param` does not.
_NAMED = (
    re.compile(r"Unrecognized request arguments? supplied: ([\w.\-]+)"),  # OpenAI, unknown field
    re.compile(r"Unsupported (?:parameter|value): '([\w.\-]+)'"),  # OpenAI, reasoning models
    re.compile(r"for the `([\w.\-]+)` header"),  # Anthropic, an unknown beta
    re.compile(r"^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*): "),  # Anthropic: "max_tokens: Field required"
)
_NOT_FIELDS = frozenset({"error", "warning", "message", "detail", "exception", "litellm", "openai", "anthropic",
                         "http", "https"})
_CONTEXT = re.compile(r"context[_ ]length|context window|prompt is too long|maximum context|too many tokens",
                      re.IGNORECASE)
_POLICY = re.compile(r"content[_ ](?:policy|filter|management)|safety system|moderation", re.IGNORECASE)
_TRACEBACK = re.compile(r"\s*Traceback \(most recent call last\).*", re.DOTALL)
_FRAME = re.compile(r'\s*File "[^"]*", line \d+.*')
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-@+]+){2,}[\\/]?[\w.\-]*\.(?:py|pyc|pyx|so|js|ts|rs|go|java)\b"
                   r"|(?<![\w.:/])/(?:home|root|usr|opt|var|tmp|srv|app|site-packages|Users)/[^\s'\"),]*")


@dataclass(frozen=True, slots=True)
class Detail:
    """What an upstream's error body says, scrubbed: its message, the field it names, its code
    (OpenAI's `code`, e.g. context_length_exceeded) and its type (invalid_request_error...)."""

    message: str
    param: str | None = None
    code: str | None = None
    type: str | None = None


def scrub(text: str) -> str:
    """`text` as a client may be shown it: no traceback, no file path, one line, bounded."""
    text = _TRACEBACK.sub("", text)
    text = _FRAME.sub("", text)
    text = _PATH.sub("[path]", text)
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[:_SHOWN - 1] + "…"


def detail_of(body: str) -> Detail:
    """The error an upstream's body describes, in any of the shapes providers use: OpenAI's and
    LiteLLM's `{"error": {...}}`, Anthropic's `{"type": "error", "error": {...}}`, vLLM's flat
    `{"object": "error", "message": ...}`, FastAPI's `{"detail": ...}`, or plain text."""
    try:
        data = orjson.loads(body)
    except ValueError:
        data = None
    error = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(error, str):
        error = {"message": error}
    if not isinstance(error, dict):
        return _detail(body, None, None, None)
    message = error.get("message") or error.get("detail") or (data.get("detail") if isinstance(data, dict) else None)
    text = message if isinstance(message, str) else (orjson.dumps(message).decode() if message else body)
    return _detail(text, error.get("param"), error.get("code"), error.get("type"))


def _detail(message: str, param: Any, code: Any, kind: Any) -> Detail:
    shown = scrub(message)
    named = param if isinstance(param, str) and param and param not in ("None", "null") else _named(message)
    return Detail(shown, named, code if isinstance(code, str) and not code.isdigit() else None,
                  kind if isinstance(kind, str) and kind != "None" else None)


def field_named(text: str) -> str | None:
    """The request field named in `text`, which quotes an upstream's message somewhere inside
    (an error's own message: "b: the upstream refused the request (HTTP 401: Rejected ...)")."""
    return _named(text, whole=False)


def _named(message: str, *, whole: bool = True) -> str | None:
    """The field `message` names; `whole`: it is the upstream's message itself, so a leading
    "field: ..." (Anthropic's way) names one too."""
    rejected = _REJECTED.search(message)
    if rejected:
        return rejected.group(1)
    for pattern in _NAMED if whole else _NAMED[:-1]:
        found = pattern.search(message.strip())
        if found and found.group(1).split(".")[0] not in _NOT_FIELDS:
            return found.group(1)
    return None


def error_for_status(status: int, headers: Mapping[str, str], body: str, *, backend: str,
                     model: str) -> BackendError:
    """An upstream's error answer in our tree, per the table above. `headers` are looked up in
    lower case: pass a case-insensitive mapping (aiohttp's, httpx's)."""
    body = body[:_BODY_LIMIT]
    detail = detail_of(body)
    shown = f"HTTP {status}: {detail.message}" if detail.message else f"HTTP {status}"
    where = Where(backend=backend, model=model)
    fault = _status_fault(status, detail, body)
    if fault == "request":
        return _request_fault(f"the upstream refused the request ({shown})", detail, status, body, where)
    if fault == "pressure":
        retry_after = parse_retry_after(headers.get("retry-after"))
        return RateLimited(f"rate limited ({shown})", retry_after=retry_after, status=status, body=body, **where)
    if fault == "credential":
        return AuthError(f"the server refused the API key ({shown}); check the key's environment variable",
                         status=status, body=body, **where)
    if status in _NOT_THERE:
        return NotServed(f"nothing is served there ({shown}); check the backend's base_url and model", status=status,
                         body=body, **where)
    return BackendUnavailable(f"server error ({shown})", status=status, body=body, **where)


def _status_fault(status: int, detail: Detail, body: str) -> Fault:
    """Whose fault an error status is, given what its body says (the table above)."""
    if status < 500 and _REJECTED.search(body):
        return "request"
    if status in _NOT_THERE:
        return "request" if _names_a_field(detail) else "backend"
    if status == 429:
        return "credential" if detail.code == "insufficient_quota" else "pressure"
    if status in _CREDENTIAL:
        return "credential"
    return "backend" if status >= 500 or status in (408, 409) else "request"  # 400, 413, 422, 451 and the rest


def _names_a_field(detail: Detail) -> bool:
    return detail.param is not None and detail.param != "model"


def _request_fault(message: str, detail: Detail, status: int | None, body: str | None, where: Where) -> BadRequest:
    return BadRequest(message, status=status, body=body, param=detail.param, code=_code(detail), **where)


def _code(detail: Detail) -> str:
    """OpenAI's code for the reason, which clients act on (Codex compacts on
    context_length_exceeded)."""
    said = f"{detail.code or ''} {detail.type or ''} {detail.message}"
    if _CONTEXT.search(said):
        return "context_length_exceeded"
    if _POLICY.search(said):
        return "content_policy_violation"
    return detail.code or "invalid_request"


def stream_error(kind: str | None, message: str, where: Where) -> BackendError:
    """An error a provider sent as a stream event after its 200 (Anthropic's `error` event, an
    OpenAI-compatible server's `{"error": ...}` chunk), by its `type`."""
    detail = _detail(message, None, None, kind)
    shown = f"{kind}: {detail.message}" if kind else detail.message
    if kind in _REQUEST_TYPES:
        return _request_fault(f"the upstream refused the request ({shown})", detail, None, None, where)
    if kind in _CREDENTIAL_TYPES:
        return AuthError(f"the server refused the API key ({shown})", **where)
    if kind in _PRESSURE_TYPES:
        return RateLimited(f"rate limited ({shown})", **where)
    return BackendUnavailable(f"the stream failed ({shown})", **where)


_THINKING = re.compile(r"thinking|signature|redacted_thinking|reasoning", re.IGNORECASE)


def refuses_thinking(error: BaseException) -> bool:
    """Whether `error` is an upstream refusing the request's thinking blocks (Anthropic: 400
    "messages.1.content.0.thinking.signature: Invalid `signature` in `thinking` block"; litellm
    failing to write `thinking_blocks`): the request's fault, about its signed thinking."""
    if not isinstance(error, BadRequest):
        return False
    return bool(_THINKING.search(error.param or "") or _THINKING.search(str(error)))


def refused(message: str, *, param: str | None, where: Where) -> BadRequest:
    """A value of the client's this kind cannot write (so the upstream never saw it)."""
    return BadRequest(message, param=param, code="invalid_request", **where)


def failed_writing(exc: BaseException, where: Where) -> BadRequest:
    """A library (litellm) failed while writing the request for its provider, before anything
    was sent: something in the request is not what the provider's format expects. Whatever it
    is, it is this request's (every request of another shape still goes through)."""
    detail = _detail(f"{type(exc).__name__}: {exc}", None, None, None)
    return BadRequest(f"the request could not be written for this provider ({detail.message})",
                      param=detail.param, code="invalid_request", **where)


def client_header(name: str, values: object, *, param: str, where: Where) -> list[str]:
    """`values` (a client's list for header `name`) as header values; BadRequest naming `param`
    when it is not a list of strings, or one holds a line break or another control character
    (which would end the header, or start another)."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise refused(f"{param} must be a list of strings (each becomes a value of the {name} header), "
                      f"got {type(values).__name__}", param=param, where=where)
    out = []
    for value in values:
        if not isinstance(value, str):
            raise refused(f"{param} must hold strings, got {type(value).__name__} {value!r:.40}", param=param,
                          where=where)
        if any(ord(c) < 0x20 or c == "\x7f" for c in value):
            raise refused(f"{param} holds a control character (a line break?) in {value!r:.60}; a header value "
                          "cannot", param=param, where=where)
        out.append(value)
    return out
