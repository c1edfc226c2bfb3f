"""The options of one routed call, declared once and checked on every call.

`Router.acomplete`, `astream`, `complete`, `stream` and `explain` all take these keywords
(`**options: Unpack[RouteOptions]`, so a type checker sees each one). At run time a keyword
that is not one of them is a TypeError naming the closest option (`deadline=` -> `deadline_s`),
never a parameter silently sent to the provider: provider parameters no option names go in one
explicit mapping, `extra=`.

Router options (model, deadline_s, prefer, max_cost_usd, ...) steer the router; provider
options (tools, tool_choice, response_format, seed, ...) and `extra` are sent upstream with the
request (`Request.extra`), and what they need (tools, a response format) steers which backends
may take it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from backends.client_fields import refusal
from router.sessions import check_key

__all__ = ["PROVIDER_OPTIONS", "ModelOptions", "ROUTER_OPTIONS", "ResolvedOptions", "RouteOptions", "resolve_options"]


class ModelOptions(TypedDict, total=False):
    """The keywords of a routed call but `model` (for a framework's model object, built for one
    model name). See RouteOptions."""

    max_tokens: int | None
    temperature: float | None
    stop: str | list[str] | None
    deadline_s: float | None
    prefer: str | None
    max_cost_usd: float | None
    session: str | None
    tools: list[dict[str, Any]] | None
    tool_choice: str | dict[str, Any] | None
    parallel_tool_calls: bool | None
    response_format: dict[str, Any] | None
    seed: int | None
    top_p: float | None
    extra: Mapping[str, Any] | None


class RouteOptions(ModelOptions, total=False):
    """Every keyword a routed call takes (all optional).

    model: `auto` (default), a backend or a consortium name.
    max_tokens, temperature, stop: generation limits, sent to whichever backend answers.
    deadline_s: seconds for the whole request, fallbacks included (default: the tier's or routing's).
    prefer: fast | cheap | best (default: routing.prefer).
    max_cost_usd: dollars this call may spend: candidates predicted to cost more are left out
        (CostLimitExceeded when none is left), and a consortium stops calling models once its
        running cost would pass it.
    session: the id of the task this call belongs to (router/sessions.py): its calls keep one
        backend, and its tier only moves up. `Router.session()` makes one; "auto" derives it
        from the conversation (the user's own first words), as `route serve` does.
    tools, tool_choice, parallel_tool_calls, response_format, seed, top_p: OpenAI chat parameters,
        sent upstream; tools and response_format also decide which backends may answer.
    extra: any other provider parameter, sent upstream verbatim.
    """

    model: str | None


ROUTER_OPTIONS = ("model", "max_tokens", "temperature", "stop", "deadline_s", "prefer", "max_cost_usd", "session")
PROVIDER_OPTIONS = ("tools", "tool_choice", "parallel_tool_calls", "response_format", "seed", "top_p")
_ALL = (*ROUTER_OPTIONS, *PROVIDER_OPTIONS, "extra")
_KNOWN = frozenset(_ALL)  # every call is checked against it: one set comparison when all is well
_ROUTERS = frozenset((*ROUTER_OPTIONS, "extra"))  # never sent upstream

# Names people reach for from other APIs (litellm, the OpenAI SDK, our own config) that difflib
# would not find: each maps to the option that does what they meant.
_SYNONYMS = {
    "timeout": "deadline_s", "timeout_s": "deadline_s", "deadline_ms": "deadline_s", "request_timeout": "deadline_s",
    "budget": "max_cost_usd", "max_cost": "max_cost_usd", "cost_limit": "max_cost_usd", "max_budget": "max_cost_usd",
    "budget_usd": "max_cost_usd", "spend_limit": "max_cost_usd",
    "max_completion_tokens": "max_tokens", "max_output_tokens": "max_tokens", "stop_sequences": "stop",
    "functions": "tools", "backend": "model", "consortium": "model", "preference": "prefer",
}

_NUMBERS = {"max_tokens": int, "temperature": float, "deadline_s": float, "max_cost_usd": float, "seed": int,
            "top_p": float}


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class ResolvedOptions:
    """Checked options: the router's own, and `extra`, everything sent upstream (provider options
    merged into the caller's `extra=`)."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    deadline_s: float | None = None
    prefer: str | None = None
    max_cost_usd: float | None = None
    session: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_options(method: str, options: Mapping[str, Any]) -> ResolvedOptions:
    """`options` checked: TypeError for an unknown keyword (with the option meant) or a value of
    the wrong type, ValueError for a negative or NaN number and for a field of `extra` no client
    may set. `method` names the callable in messages ("Router.acomplete")."""
    if not options.keys() <= _KNOWN:
        raise TypeError(_unknown_message(method, [name for name in options if name not in _KNOWN]))
    for name, value in options.items():  # the few given, not every option there is
        kind = _NUMBERS.get(name)
        if kind is not None and value is not None:
            _check_number(method, name, value, kind)
    stop = options.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    return ResolvedOptions(
        model=options.get("model"), max_tokens=options.get("max_tokens"), temperature=options.get("temperature"),
        stop=stop, deadline_s=options.get("deadline_s"), prefer=options.get("prefer"),
        max_cost_usd=options.get("max_cost_usd"), extra=_upstream(method, options),
        session=_session(method, options.get("session")),
    )


def _session(method: str, key: Any) -> str | None:
    return None if key is None else check_key(key, f"{method}(): session")


def _unknown_message(method: str, unknown: list[str]) -> str:
    parts = []
    for name in unknown:
        meant = _SYNONYMS.get(name) or next(iter(difflib.get_close_matches(name, _ALL, n=1, cutoff=0.6)), None)
        parts.append(f"{name!r} (did you mean {meant!r}?)" if meant else repr(name))
    plural = "s" if len(unknown) > 1 else ""
    return (f"{method}() got unexpected keyword argument{plural} {', '.join(parts)}. Its options are "
            f"{', '.join(_ALL)}; a parameter only your provider knows goes in extra={{...}}, sent upstream verbatim.")


def _check_number(method: str, name: str, value: Any, kind: type) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise TypeError(f"{method}(): {name} must be {'an integer' if kind is int else 'a number'} "
                        f"(got {type(value).__name__} {value!r})")
    if math.isnan(value):
        raise ValueError(f"{method}(): {name} must be a number (got nan)")
    if value < 0 and name != "seed":
        raise ValueError(f"{method}(): {name} must not be negative (got {value!r})")


def _upstream(method: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The provider options and `extra`, as one dict; a name given both ways, a router option
    smuggled into `extra`, or a field that is the operator's (an endpoint, a key, a header:
    backends/client_fields.py), is refused rather than guessed at."""
    given = options.get("extra")
    if given is not None and not isinstance(given, Mapping):
        raise TypeError(f"{method}(): extra must be a mapping of provider parameters "
                        f"(got {type(given).__name__})")
    extra = dict(given or {})
    ours = [name for name in extra if name in _ROUTERS]
    if ours:
        raise TypeError(f"{method}(): {', '.join(map(repr, ours))} in extra= is the router's own option, "
                        "never sent upstream; pass it as a keyword instead")
    refused = refusal(extra)
    if refused is not None:
        raise ValueError(f"{method}(): extra: {refused[1]}")
    for name in PROVIDER_OPTIONS:  # in this order: the same options, the same body upstream
        value = options.get(name)
        if value is None:
            continue
        if name in extra:
            raise TypeError(f"{method}(): {name!r} was given both as a keyword and in extra=; give it once")
        extra[name] = value
    return extra
