"""Consortium mode: fan a prompt out to N models, let a fast arbiter rank or synthesize.

    consortia:
      cns-glm: {members: [glm-5.2*5], arbiter: mercury-2, judging: rank}

`Consortium` is a Backend; `Router.backend(name)` builds one for every `consortia:` entry.
Attributes are imported on first use so that loading the config schema stays cheap.
"""

from __future__ import annotations

from router.lazy import lazy_exports

__all__ = [
    "BudgetExhausted",
    "CallBudget",
    "Consortium",
    "ConsortiumConfig",
    "MemberSpec",
    "check_consortia",
    "find_cycle",
    "parse_member",
    "resolve_tree",
]

_HOMES = {
    "BudgetExhausted": "router.consortium.budget",
    "CallBudget": "router.consortium.budget",
    "Consortium": "router.consortium.consortium",
    "ConsortiumConfig": "router.consortium.spec",
    "MemberSpec": "router.consortium.spec",
    "parse_member": "router.consortium.spec",
    "check_consortia": "router.consortium.graph",
    "find_cycle": "router.consortium.graph",
    "resolve_tree": "router.consortium.graph",
}

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
