"""Consortia as a graph: unknown names and cycles rejected at load time, and the resolved tree.

A consortium refers to backends and other consortia (as members or as arbiter). The config is
valid only if every name exists and no consortium reaches itself: a cycle would fan out without
end, so it is reported with its path, e.g. "cns-a -> cns-b -> cns-a".
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from backends.errors import ConfigError
from router.consortium.spec import DEFAULT_BUDGET, ConsortiumConfig

__all__ = ["check_consortia", "find_cycle", "resolve_tree"]

LineOf = Callable[..., int | None]


def check_consortia(consortia: Mapping[str, ConsortiumConfig], backends: Mapping[str, Any],
                    path: str, line_of: LineOf) -> None:
    """Raise ConfigError (with file and line) for an unknown name or a cycle."""
    known = set(backends) | set(consortia)
    for name, spec in consortia.items():
        for index, member in enumerate(spec.members):
            if member.model not in known:
                raise ConfigError(
                    f"consortium {name!r} has member {member.model!r}, which is neither a backend nor a "
                    f"consortium.{_hint(member.model, known)} Known: {', '.join(sorted(known))}.",
                    path=path, line=line_of("consortia", name, "members", index),
                )
        if spec.arbiter not in known:
            raise ConfigError(
                f"consortium {name!r} has arbiter {spec.arbiter!r}, which is neither a backend nor a "
                f"consortium.{_hint(spec.arbiter, known)} Known: {', '.join(sorted(known))}.",
                path=path, line=line_of("consortia", name, "arbiter"),
            )
    cycle = find_cycle(consortia)
    if cycle:
        raise ConfigError(
            f"consortia form a cycle: {' -> '.join(cycle)}. A consortium cannot contain itself, as a "
            "member or as arbiter, at any depth; remove one of these references.",
            path=path, line=line_of("consortia", cycle[0]),
        )
    _check_budgets(consortia, path, line_of)


def _check_budgets(consortia: Mapping[str, ConsortiumConfig], path: str, line_of: LineOf) -> None:
    """A run whose planned calls (no retries, max_iterations rounds) exceed its budget would be
    cut off on every run: refuse it now rather than bill a truncated answer."""
    memo: dict[str, int] = {}
    for name, spec in consortia.items():
        worst = calls_per_run(name, consortia, worst=True, memo=memo)
        if worst > spec.effective_budget:
            which = f"its budget of {spec.budget}" if spec.budget is not None else \
                f"the default budget of {DEFAULT_BUDGET} (no `budget:` set)"
            line = line_of("consortia", name, "budget") if spec.budget is not None else line_of("consortia", name)
            raise ConfigError(
                f"consortium {name!r} plans {worst} model calls per run (every member sample and arbiter, "
                f"nested consortia expanded, {spec.max_iterations} iteration(s)), more than {which}. "
                f"Set `budget: {worst}` or more (retries are charged to it too), or use fewer samples, "
                "members or iterations.",
                path=path, line=line,
            )


def _hint(name: str, known: set[str]) -> str:
    if ":" in name and name.rsplit(":", 1)[1].isdigit() and name.rsplit(":", 1)[0] in known:
        base, n = name.rsplit(":", 1)
        return f" For {n} samples of {base!r} write `{base}*{n}` (colons belong to model names)."
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def find_cycle(consortia: Mapping[str, ConsortiumConfig]) -> list[str] | None:
    """The first cycle found, as a closed path [a, b, ..., a], or None. Depth-first, in config order."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for ref in dict.fromkeys(consortia[name].names()):
            if ref not in consortia:
                continue
            if state.get(ref) == 1:
                return [*stack[stack.index(ref):], ref]
            if ref not in state:
                found = visit(ref)
                if found:
                    return found
        stack.pop()
        state[name] = 2
        return None

    for name in consortia:
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def resolve_tree(name: str, consortia: Mapping[str, ConsortiumConfig],
                 backends: Mapping[str, Any]) -> dict[str, Any]:
    """The consortium expanded down to backends, as plain data (for `route consortium show`).
    Assumes the config passed check_consortia (acyclic)."""
    if name not in consortia:
        spec = backends.get(name)
        return {"name": name, "kind": "backend", "model": getattr(spec, "model", None)}
    spec = consortia[name]
    members = []
    for member in spec.members:
        node = resolve_tree(member.model, consortia, backends)
        node.update(samples=member.n, system=member.system, temperature=member.temperature)
        members.append(node)
    return {
        "name": name,
        "kind": "consortium",
        "judging": spec.judging,
        "arbiter": resolve_tree(spec.arbiter, consortia, backends),
        "members": members,
        "calls_per_run": calls_per_run(name, consortia),
        "worst_case_calls": calls_per_run(name, consortia, worst=True),
        "budget": spec.effective_budget,
    }


def calls_per_run(name: str, consortia: Mapping[str, ConsortiumConfig], *, worst: bool = False,
                  memo: dict[str, int] | None = None) -> int:
    """Model calls of one run without retries: every member sample and one arbiter call per
    iteration, expanded through nested consortia. `worst` uses max_iterations, else min.
    `memo` makes a graph with shared sub-consortia cost one visit per consortium."""
    if name not in consortia:
        return 1
    memo = {} if memo is None else memo
    if name not in memo:
        spec = consortia[name]
        per_round = sum(m.n * calls_per_run(m.model, consortia, worst=worst, memo=memo) for m in spec.members)
        per_round += calls_per_run(spec.arbiter, consortia, worst=worst, memo=memo)
        memo[name] = per_round * (spec.max_iterations if worst else spec.min_iterations)
    return memo[name]
