"""What every framework adapter shares: the decision as plain facts, and the options a model
object is built with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.decision import Decision, RouteResult

__all__ = ["decision_facts", "merged_options", "result_facts", "string_facts"]


def decision_facts(decision: Decision) -> dict[str, Any]:
    """What the router decided before calling: first choice, tier, score, planned downgrade."""
    downgrade = decision.downgrade
    return {"chosen": decision.chosen, "tier": decision.tier,
            "score": round(decision.score.value, 4) if decision.score is not None else None,
            "forced": decision.forced, "reason": decision.reason,
            "downgrade": downgrade.as_dict() if downgrade is not None else None}


def result_facts(result: RouteResult) -> dict[str, Any]:
    """The decision and what came of it: who answered, its cost, any downgrade or losses."""
    c = result.completion
    downgrade = result.downgrade
    facts = {**decision_facts(result.decision), "backend": c.backend, "model": c.model, "cost_usd": c.cost_usd,
             "downgrade": downgrade.as_dict() if downgrade is not None else None,
             "input_tokens": c.usage.input_tokens, "output_tokens": c.usage.output_tokens}
    if c.metadata.get("degraded"):
        facts["degraded"] = list(c.metadata["degraded"])
    if c.metadata.get("simulated"):
        facts["simulated"] = True
    if c.metadata.get("trace_id"):
        facts["trace_id"] = c.metadata["trace_id"]
    return facts


def string_facts(facts: Mapping[str, Any], prefix: str = "route_") -> dict[str, str]:
    """`facts` as a flat str -> str map (for metadata fields that hold only strings), Nones left out."""
    out = {}
    for key, value in facts.items():
        if value is None or key == "reason":
            continue
        if key == "downgrade":
            value = f"{value['from_tier']}->{value['to_tier']}"
        elif isinstance(value, list):
            value = "; ".join(map(str, value))
        out[prefix + key] = str(value)[:512]  # the Responses API's metadata values hold 512 characters
    return out


def merged_options(fixed: Mapping[str, Any], per_call: Mapping[str, Any]) -> dict[str, Any]:
    """The model object's own options under the framework's per-call settings (None: not set);
    `extra` mappings are merged, the per-call one winning. Router.acomplete checks the result."""
    out = {**fixed}
    for key, value in per_call.items():
        if value is None:
            continue
        if key == "extra":
            out["extra"] = {**(out.get("extra") or {}), **value}
        else:
            out[key] = value
    return out
