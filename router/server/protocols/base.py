"""What every protocol dialect is: a parser from its request body to a `Call` in the router's
terms, and writers of the router's answer -- whole, as stream events, as an error -- in its own
shape. The request flow that uses them is written once (router/server/endpoint.py).

Every dialect's parser checks a body the same way (`decode`, `validated`): the body is decoded
(orjson), checked for depth before anything recurses into it, and validated against the
protocol's pydantic schema; a refusal is a 400 that names the most specific bad field (`param`)
and says what was expected, quoting a little of what came. Route's own fields (`route_options`,
`session_field`) are read the same way in every protocol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson
from pydantic import TypeAdapter, ValidationError

from backends.client_fields import not_the_clients, operator_field, refusal
from backends.types import Completion, Message, ToolCallChunk
from policies.selection import PREFER_CHOICES
from router.server.errors import ApiError

__all__ = ["MAX_DEPTH", "ROUTE_FIELDS", "Call", "Dialect", "EventWriter", "Facts", "bad_request", "decode",
           "depth_exceeds", "route_options", "sent_fields", "session_field", "validated"]

Facts = dict[str, Any]  # what the router adds about an answer (a downgrade, a degraded consortium)


@dataclass(slots=True)
class Call:
    """A request of some protocol in the router's terms. `extra` goes to the backend with the
    request (tools, response_format, ...); `echo` is the dialect's own: what its answer repeats
    back or needs to write it (the Responses API echoes instructions and tools)."""

    model: str
    messages: list[Message]
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, Any] = field(default_factory=dict)
    session: str | None = None  # the task's id, as the protocol names it (prompt_cache_key, metadata.user_id)
    route: dict[str, Any] = field(default_factory=dict)  # route's own fields: deadline_s, prefer, max_cost_usd

    def options(self, model: str, session: str | None = None) -> dict[str, Any]:
        """The router's call options for this request, routed as `model` within `session`."""
        return dict(model=model, max_tokens=self.max_tokens, temperature=self.temperature, stop=self.stop,
                    extra=self.extra, session=session, **self.route)


class EventWriter(Protocol):
    """One stream's events, as bytes ready to send. `draft` may return b"": only a client that
    asked for diffusion drafts gets them. `thinking`'s signature is the provider's seal on the
    thinking so far, `redacted` a whole block of thinking the provider sent encrypted: each
    protocol hands them to the client in its own shape, so that they come back with the next
    call (router/server/protocols/reasoning.py). Tool calls stream as they form (`tool_call`);
    `finish` writes whole those that did not stream."""

    def start(self) -> bytes: ...
    def text(self, text: str) -> bytes: ...
    def thinking(self, text: str, signature: str | None = None, redacted: str | None = None) -> bytes: ...
    def draft(self, text: str) -> bytes: ...
    def tool_call(self, piece: ToolCallChunk) -> bytes: ...
    def finish(self, completion: Completion | None, facts: Facts | None) -> bytes: ...
    def error(self, err: ApiError) -> bytes: ...


class Dialect(Protocol):
    """One API's wire format; `protocol` is its name where a person reads it (the web view)."""

    protocol: str

    def parse(self, raw: bytes) -> Call: ...
    def error_body(self, err: ApiError) -> bytes: ...
    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes: ...
    def writer(self, call: Call) -> EventWriter: ...


# -- the body checks every dialect's parse runs ------------------------------------------------

MAX_DEPTH = 64  # nested objects and arrays in one body: tool schemas are the deepest real thing
_SHOWN_INPUT = 80  # characters of a refused value quoted back
T = TypeVar("T")


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def decode(raw: bytes, what: str) -> dict[str, Any]:
    """The body as a JSON object no deeper than MAX_DEPTH; `what` names the object expected."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the request body is not valid JSON ({exc}); send {what}") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object: {what}")
    # Each level takes an opening bracket: a body with few cannot be deep, so skip the walk.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and depth_exceeds(body):
        raise bad_request(f"the request body nests objects and arrays more than {MAX_DEPTH} levels deep; "
                          "no field of this API needs that")
    return body


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` nests objects/arrays more than `limit` deep. Iterative, level by level:
    the point is that a hostile body must not reach anything that recurses."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            below += [c for c in (item.values() if type(item) is dict else item)
                      if type(c) is dict or type(c) is list]
        level = below
    return False


def validated(adapter: TypeAdapter[T], body: dict[str, Any], reference: str) -> T:
    """`body` as the schema's object, or a 400 naming the field; `reference` says where the
    API's shape is documented."""
    try:
        return adapter.validate_python(body)
    except ValidationError as exc:
        raise _refusal(exc, body, reference) from None


# Route's own request fields, in every protocol: the Python API's options of the same names.
ROUTE_FIELDS = ("deadline_s", "prefer", "max_cost_usd")


def route_options(body: dict[str, Any]) -> dict[str, Any]:
    """The route fields a body sets, checked: a 400 naming the field for a value the router
    cannot use (`deadline_s: "soon"`, `prefer: "free"`, `max_cost_usd: -1`), or for a field that
    is the operator's (`api_base`, `api_key`, `extra_headers`...: backends/client_fields.py),
    which no protocol takes from a client."""
    owned = operator_field(body)
    if owned is not None:
        raise bad_request(not_the_clients(owned), owned)
    return {name: _route_value(name, body[name]) for name in ROUTE_FIELDS if body.get(name) is not None}


def session_field(body: dict[str, Any], protocols_own: Any = None) -> str | None:
    """The session a body names: route's own `session` field (any protocol; never sent
    upstream), else the protocol's own id (`protocols_own`: prompt_cache_key, metadata.user_id)
    when it is a string. A `session` that is not a string is a 400 naming it."""
    given = body.get("session")
    if given is None:
        return protocols_own if isinstance(protocols_own, str) else None
    if not isinstance(given, str):
        raise bad_request(f"`session` must be a string, the task's id (got {_shown(given)}); or send the id in "
                          "the X-Session-Id header", "session")
    return given


def _route_value(name: str, value: Any) -> Any:
    if name == "prefer":
        if value not in PREFER_CHOICES:
            raise bad_request(f"`prefer` must be one of {', '.join(PREFER_CHOICES)} (got {_shown(value)}): fast "
                              "picks the quickest backend that is good enough, cheap the cheapest that meets the "
                              "deadline, best the strongest", name)
        return value
    number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not number or (value <= 0 if name == "deadline_s" else value < 0):
        what = "seconds, a number above 0" if name == "deadline_s" else "dollars, a number of at least 0"
        raise bad_request(f"`{name}` must be {what} (got {_shown(value)})", name)
    return value


def sent_fields(extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` (what a request sends upstream), or a 400 naming the first field no client may
    send: the operator's (an endpoint, a key, a header), a priced service tier, a malformed
    `anthropic_beta` (backends/client_fields.py)."""
    refused = refusal(extra)
    if refused is not None:
        raise bad_request(refused[1], refused[0])
    return extra


# -- refusals ---------------------------------------------------------------------------------

def _param(loc: tuple[Any, ...], body: Any, missing: bool) -> str:
    """The field `loc` points at, as a client writes it (`messages[0].content`). pydantic puts
    the tags of union members in `loc` too (`user`, `str`, `list[...]`); walking the body along
    `loc` tells them apart from field names: a field is a key of the object it is in, or the
    missing one an error of type "missing" names."""
    out, node = "", body
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
        elif (isinstance(node, dict) and part in node) or (missing and i == len(loc) - 1):
            out += f".{part}" if out else str(part)
            node = node.get(part) if isinstance(node, dict) else None
    return out


def _refusal(exc: ValidationError, body: Any, reference: str) -> ApiError:
    """One 400 naming the most specific bad field (a list of parts that fails inside says
    which part, not just "not a string"), with every reason pydantic gave for it (a union field
    fails once per alternative)."""
    errors = exc.errors(include_url=False)
    params = [_param(e["loc"], body, e["type"] == "missing") for e in errors]
    deepest = max(range(len(errors)), key=lambda k: len(errors[k]["loc"]))  # max keeps the first of equals
    first, param = errors[deepest], params[deepest]
    reasons = dict.fromkeys(e["msg"] for e, p in zip(errors, params) if p == param)
    got = "" if first["type"] == "missing" else f" (got {_shown(first.get('input'))})"
    text = "; or ".join(r[0].lower() + r[1:] for r in reasons)
    # Other alternatives of the same union fail at a prefix of `param`: not other fields.
    more = len({p for p in params if not param.startswith(p)})
    others = f"; {more} other field{'s' if more > 1 else ''} also invalid" if more else ""
    return bad_request(f"`{param or 'body'}`: {text}{got}{others}. See {reference} for its shape.", param or None)


def _shown(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _SHOWN_INPUT else text[:_SHOWN_INPUT] + "…"
