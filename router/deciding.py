"""Deciding: which backends one request tries, in order, and why -- no model call, no I/O.

The routing model (scorer, tiers, boundaries: read once per decision, so one version decides the
whole call), the session's plan, what each backend can take (tools, images, context, output), the
latency models, breakers and rate limits go in; a Decision comes out (policies/selection.py makes
the plan). Every entry point decides here, through the request scope (router/scope.py).

What a request needs of a backend is read off the request itself (`Needs`): tool calls, image
input, room in the context window, an answer as long as `max_tokens`, and an answer in a given
format (`response_format`). Candidates that lack one are left out before routing (LiteLLM calls
these pre-call checks), so a request never reaches a backend that must refuse it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from backends.capabilities import Capabilities
from backends.errors import Unsupported, UsageError
from backends.types import Message
from policies.ladder import Tier, fallback_order
from policies.routing_model import RoutingModel
from policies.scoring import Score
from policies.selection import PREFER_CHOICES, Prefer, RouteInputs, forced_plan, plan_route
from policies.shapes import KNOWN, TYPED, Shapes
from policies.template import Learned
from router.cost_limit import within_cost
from router.decision import Decision
from router.options import ResolvedOptions
from router.queueing import with_queue  # queue hook
from router.request_context import CLIENT_KEY
from router.sessions import SessionKey, SessionPlan
from router.state.rate_limits import estimate_tokens

if TYPE_CHECKING:
    from router.wiring import Parts

__all__ = ["SMALL_OUTPUT", "Decider", "Needs"]

# An answer length every model gives: below it no backend's output limit need be looked up.
SMALL_OUTPUT = 4096

_CHARS_PER_TOKEN = 4  # a cheap, conservative-enough estimate: no tokenizer on the routing path


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclasses.dataclass(slots=True)
class Needs:
    tools: bool = False
    vision: bool = False
    tokens: int = 0  # prompt plus the longest answer asked for, that the context window must hold
    structured: bool = False  # a `response_format` the answer must follow
    output: int = 0  # the longest answer asked for (max_tokens), that the backend must be able to give

    @classmethod
    def of(cls, messages: Sequence[Message], extra: Mapping[str, Any], max_tokens: int | None) -> Needs:
        chars = 0
        vision = False
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, Mapping):
                        vision = vision or part.get("type") in ("image_url", "input_image", "image")
                        chars += len(str(part.get("text") or ""))
        return cls(tools=bool(extra.get("tools")), vision=vision, tokens=chars // _CHARS_PER_TOKEN + (max_tokens or 0),
                   structured=bool(extra.get("response_format")), output=max_tokens or 0)

    def missing(self, capabilities: Capabilities, context_window: int | None,
                output_limit: int | None = None) -> str | None:
        """What `capabilities` lack for this request, in words; None when it can take it.
        `output_limit` is the longest answer the backend gives (None: not looked up)."""
        if output_limit is not None and self.output > output_limit:
            return "output"
        lacks = {"tools": self.tools and not capabilities.tools,
                 "vision": self.vision and not capabilities.vision,
                 "context": context_window is not None and self.tokens > context_window,
                 "structured": self.structured and not capabilities.structured_output}
        return next((need for need, lacking in lacks.items() if lacking), None)

    def __bool__(self) -> bool:
        return self.tools or self.vision or self.structured or self.tokens > 0 or self.output > 0


class Decider:
    """Decides for the parts of one router (router/wiring.py)."""

    __slots__ = ("_names", "_parts")

    def __init__(self, parts: Parts):
        self._parts = parts
        self._names = parts.backends.names()  # every backend and consortium: fixed by the config

    @property
    def _shapes(self) -> Shapes:
        """How requests are read: route's own CLI sends what a person typed, every word of it."""
        return TYPED if self._parts.source == "cli" else KNOWN

    def session_key(self, given: str | None, messages: list[Message], tools: Any) -> SessionKey | None:
        sessions = self._parts.sessions
        if given is None or sessions is None:
            return None
        return sessions.key_for(given, messages, tools, CLIENT_KEY.get(), self._shapes)

    def decide_by(self, messages: list[Message], model: str | None, deadline_s: float | None, max_tokens: int | None,
                prefer: str | None, needs: Needs | None, max_cost_usd: float | None,
                session: SessionKey | None, tools: Any = None) -> Decision:
        checked = self._check_prefer(prefer)
        unable = self._unable(needs)
        self._check_output(unable, needs)
        if model and model != "auto":
            decision = self._decide_forced(model, deadline_s, max_tokens, unable)
        else:
            routing = self._parts.model.current  # read once: one version decides the whole call
            sessions = self._parts.sessions
            templates, shapes = self._parts.templates, self._shapes
            client = templates.client(messages, tools, CLIENT_KEY.get()) if not shapes.typed else None
            learned = templates.lookup(client)  # the client's own template: read, never written, here
            plan = (sessions.plan(session, messages, routing, tools, learned, shapes)
                    if session is not None and sessions is not None else None)
            decision = self._decide_routed(routing, messages, deadline_s, max_tokens, checked, unable, plan, tools,
                                           learned, shapes)
            if decision.task is not None:  # learned after the answer (router/scope.py finish)
                decision.lesson = templates.sample(client, messages, decision.task.words)
        if max_cost_usd is None:
            return decision
        return within_cost(self._parts, decision, messages, max_tokens, max_cost_usd)

    def _decide_routed(self, routing: RoutingModel, messages: list[Message], deadline_s: float | None,
                       max_tokens: int | None, prefer: Prefer, unable: Mapping[str, str],
                       session: SessionPlan | None = None, tools: Any = None, learned: Learned | None = None,
                       shapes: Shapes = KNOWN) -> Decision:
        score: Score | None
        if session is None:
            placement = routing.place(messages, tools, shapes, learned)
            index, score, crossings, task = placement.index, placement.score, placement.crossings, placement.task
            opening = routing.reason(placement)
        else:  # the task's tier, not the transcript's (router/sessions.py)
            score, index, crossings, task = session.score, session.index, session.crossings, session.task
            opening = f"session {session.label[:24]}: {session.why}"
        tier = routing.tiers[index]
        if deadline_s is None:
            deadline_s = _seconds(tier.deadline_ms or self._parts.config.routing.deadline_ms)
        tiers = self._capable_tiers(routing.tiers, unable)
        inputs = self._route_inputs(tiers, messages, deadline_s, max_tokens, prefer, session)
        plan = plan_route(tiers, index, inputs)
        return Decision(
            plan=plan,
            reason=f"{opening}: tier {tier.name!r}; {plan.why}",
            score=score,
            tier=tier.name,
            crossings=crossings,
            deadline_s=deadline_s,
            session=session,
            version=routing.version,
            task=task,
        )

    def _unable(self, needs: Needs | None) -> dict[str, str]:
        """Backend -> the need it cannot meet (tools, vision, context, structured), for this request."""
        if not needs:
            return {}
        unable = {}
        for name in self._names:
            backend = self._parts.backends.built[name]
            output_limit = backend.output_limit if needs.output > SMALL_OUTPUT else None
            missing = needs.missing(backend.current_capabilities(), backend.settings.context_window, output_limit)
            if missing:
                unable[name] = missing
        return unable

    def _check_output(self, unable: Mapping[str, str], needs: Needs | None) -> None:
        """Unsupported, before anything else, when the answer asked for is longer than any
        backend gives (`max_tokens: 2**62`), whatever the model named."""
        if needs is None or not unable or any(unable.get(name) != "output" for name in self._names):
            return
        longest = max(self._parts.backends.built[name].output_limit for name in self._parts.config.backends)
        raise Unsupported(f"max_tokens {needs.output:,} is more than any configured backend answers (the longest "
                          f"gives {longest:,} tokens); lower max_tokens, or set `max_output_tokens` on a backend "
                          "whose provider allows more", need="output")

    def _cannot(self, name: str, need: str) -> str:
        """Why backend `name` cannot take this request, in words ("cannot take `tools`: ...")."""
        why = self._parts.backends.built[name].refusal(need)
        return f"cannot take {_NEED_WORDS[need]}" + (f": {why}" if why else "")

    def _capable_tiers(self, tiers: tuple[Tier, ...], unable: Mapping[str, str]) -> tuple[Tier, ...]:
        if not unable:
            return tiers
        capable = tuple(self._without(t, unable) for t in tiers)
        if not any(t.backends for t in capable):
            need = next(iter(unable.values()))
            whys = "; ".join(f"{name} {why}" for t in capable for name, why in t.left_out)
            raise Unsupported(f"none of the backends `auto` routes to can take this request ({whys}); "
                              f"{self._who_can(unable, need)}", need=need)
        return capable

    def _without(self, tier: Tier, unable: Mapping[str, str]) -> Tier:
        """`tier` less the backends that cannot take this request, each left out with why."""
        return dataclasses.replace(tier, backends=tuple(b for b in tier.backends if b not in unable),
                                   left_out=tuple((b, self._cannot(b, unable[b])) for b in tier.backends if b in unable))

    def _who_can(self, unable: Mapping[str, str], need: str) -> str:
        able = [n for n in self._names if n not in unable]
        hint = f"ask for one that can: {', '.join(able)}" if able else "no configured backend can"
        return f"{hint}, or send the request without {_NEED_WORDS[need]}"

    def _decide_forced(self, model: str, deadline_s: float | None, max_tokens: int | None,
                       unable: Mapping[str, str]) -> Decision:
        table = self._parts.backends
        if not table.knows(model):
            raise table.unknown(model)
        if model in unable:
            need = unable[model]
            raise Unsupported(f"model {model!r} {self._cannot(model, need)}; {self._who_can(unable, need)}",
                              need=need)
        if deadline_s is None:
            deadline_s = _seconds(self._parts.config.routing.deadline_ms)
        learned = self._parts.latency.model(model)
        if model in table.queued:  # queue hook (router/queueing.py): a backend with a line of its own
            with_queue(learned, table.queued[model])
        plan = forced_plan(model, learned.predict(max_tokens))
        return Decision(plan=plan, reason=plan.why, forced=True, deadline_s=deadline_s,
                        version=self._parts.model.current.version)

    def _check_prefer(self, prefer: str | None) -> Prefer:
        prefer = prefer or self._parts.config.routing.prefer
        if prefer not in PREFER_CHOICES:
            raise UsageError(f"prefer must be fast, cheap or best (got {prefer!r}): fast picks the quickest backend "
                             "that is good enough, cheap the cheapest that meets the deadline, best the strongest.")
        return prefer

    def _route_inputs(self, tiers: tuple[Tier, ...], messages: list[Message], deadline_s: float | None,
                      max_tokens: int | None, prefer: Prefer, session: SessionPlan | None = None) -> RouteInputs:
        parts = self._parts
        names = fallback_order(tiers, 0)
        states = {name: parts.breakers[name].state for name in names}
        settings = self._parts.config.routing.latency
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        sticky, cached = (session.sticky, session.cached) if session is not None else (None, {})
        return RouteInputs(
            models=self._latency_models(names),
            prices=parts.prices,
            input_tokens=chars // 4,  # ~4 characters per token: close enough for a cost estimate
            max_tokens=max_tokens,
            deadline_s=deadline_s,
            prefer=prefer,
            cost_tolerance=self._parts.config.routing.cost_tolerance,
            blocked={n for n, st in states.items() if st == "open"},
            half_open={n for n, st in states.items() if st == "half-open"},
            exploring=frozenset(parts.latency.exploring),
            now=time.time(),
            stale_after_s=settings.stale_after_ms / 1000,
            explore_rate=settings.explore_rate,
            explore_roll=parts.random.random(),
            hedge=self._parts.config.routing.hedge,
            on_deadline_risk=self._parts.config.routing.on_deadline_risk,
            limited=self._limited(names, messages, max_tokens),
            sticky=sticky,
            cached_tokens=cached,
        )

    def _latency_models(self, names: list[str]) -> dict[str, Any]:
        models = {name: self._parts.latency.model(name) for name in names}
        queued = self._parts.backends.queued
        for name in queued.keys() & models.keys() if queued else ():
            # queue hook (router/queueing.py): a backend's own line of requests is part of its prediction
            with_queue(models[name], queued[name])
        return models

    def _limited(self, names: list[str], messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        """The candidates at their rate limits for this request (none without limits: nothing read)."""
        limiter = self._parts.rate_limits
        limited = [name for name in names if ("backend", name) in limiter.limits]
        if not limited:
            return {}
        tokens = estimate_tokens(messages, max_tokens)  # what a call would take from a backend's tpm
        return {n: refused for n in limited if (refused := limiter.peek(n, tokens)) is not None}


    def decide(self, messages: list[Message], opts: ResolvedOptions, session: SessionKey | None) -> Decision:
        return self.decide_by(messages, opts.model, opts.deadline_s, opts.max_tokens, opts.prefer,
                            Needs.of(messages, opts.extra, opts.max_tokens), opts.max_cost_usd, session,
                            opts.extra.get("tools"))


def _seconds(ms: float | None) -> float | None:
    return ms / 1000 if ms else None


_NEED_WORDS = {"tools": "`tools`", "vision": "image input", "context": "a prompt this long",
               "structured": "`response_format`", "output": "a `max_tokens` this large"}
