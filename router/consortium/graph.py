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
from router.consortium.budget import MAX_DEPTH
from router.consortium.spec import DEFAULT_BUDGET, ConsortiumConfig

__all__ = ["calls_per_run", "check_consortia", "find_cycle", "nesting_depths", "resolve_tree"]

LineOf = Callable[..., int | None]
# A name from llm or llm-consortium is usually a model no backend serves here yet.
_ADD = " To add a backend: `route backend add NAME --model MODEL --base-url URL` (see `route backend add --help`)."


def check_consortia(consortia: Mapping[str, ConsortiumConfig], backends: Mapping[str, Any],
                    path: str, line_of: LineOf) -> None:
    """Raise ConfigError (with file and line) for an unknown name or a cycle."""
    known = set(backends) | set(consortia)
    for name, spec in consortia.items():
        for index, member in enumerate(spec.members):
            if member.model not in known:
                raise ConfigError(
                    f"consortium {name!r} has member {member.model!r}, which is neither a backend nor a "
                    f"consortium.{_hint(member.model, known)} Known: {', '.join(sorted(known))}.{_ADD}",
                    path=path, line=line_of("consortia", name, "members", index),
                )
        if spec.arbiter not in known:
            raise ConfigError(
                f"consortium {name!r} has arbiter {spec.arbiter!r}, which is neither a backend nor a "
                f"consortium.{_hint(spec.arbiter, known)} Known: {', '.join(sorted(known))}.{_ADD}",
                path=path, line=line_of("consortia", name, "arbiter"),
            )
    cycle = find_cycle(consortia)
    if cycle:
        raise ConfigError(
            f"consortia form a cycle: {' -> '.join(cycle)}. A consortium cannot contain itself, as a "
            "member or as arbiter, at any depth; remove one of these references.",
            path=path, line=line_of("consortia", cycle[0]),
        )
    _check_depth(consortia, path, line_of)  # first: the budget check recurses once per level
    _check_budgets(consortia, path, line_of)


def _check_depth(consortia: Mapping[str, ConsortiumConfig], path: str, line_of: LineOf) -> None:
    """Refuse nesting deeper than a run allows (budget.MAX_DEPTH), naming the chain, so a
    valid-looking config never fails only at run time."""
    depths = nesting_depths(consortia)
    deepest = max(depths, key=depths.__getitem__, default=None)
    if deepest is None or depths[deepest] - 1 <= MAX_DEPTH:
        return
    chain = [deepest]
    while depths[chain[-1]] > 1:
        chain.append(max(_refs(consortia[chain[-1]], consortia), key=depths.__getitem__))
    shown = " -> ".join(chain if len(chain) <= 8 else [*chain[:3], "...", *chain[-3:]])
    raise ConfigError(
        f"consortium {deepest!r} nests {len(chain) - 1} consortia deep ({shown}); a consortium may contain "
        f"others at most {MAX_DEPTH} levels deep. Flatten the chain: give one consortium more members "
        "instead of wrapping each in another.",
        path=path, line=line_of("consortia", deepest),
    )


def _check_budgets(consortia: Mapping[str, ConsortiumConfig], path: str, line_of: LineOf) -> None:
    """A run whose planned calls (no retries, max_iterations rounds) exceed its budget would be
    cut off on every run: refuse it now rather than bill a truncated answer."""
    memo: dict[tuple[str, bool], int] = {}
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
    cycle, _ = _walk(consortia)
    return cycle


def nesting_depths(consortia: Mapping[str, ConsortiumConfig]) -> dict[str, int]:
    """How many consortia deep each one runs: 1 for one over backends only, 1 + the deepest
    consortium it uses otherwise. Assumes no cycle."""
    return _walk(consortia)[1]


def _refs(spec: ConsortiumConfig, consortia: Mapping[str, ConsortiumConfig]) -> list[str]:
    return [ref for ref in dict.fromkeys(spec.names()) if ref in consortia]


def _walk(consortia: Mapping[str, ConsortiumConfig]) -> tuple[list[str] | None, dict[str, int]]:
    """(the first cycle or None, the nesting depth of each consortium), by an explicit-stack
    depth-first walk: a chain thousands long must not hit Python's recursion limit."""
    depth: dict[str, int] = {}  # finished consortia
    on_path: dict[str, int] = {}  # name -> position in `path`
    path: list[str] = []
    for start in consortia:
        if start in depth:
            continue
        stack = [(start, iter(_refs(consortia[start], consortia)))]
        on_path[start] = 0
        path.append(start)
        while stack:
            name, refs = stack[-1]
            ref = next(refs, None)
            if ref is None:
                stack.pop()
                path.pop()
                del on_path[name]
                depth[name] = 1 + max((depth[r] for r in _refs(consortia[name], consortia)), default=0)
            elif ref in on_path:
                return [*path[on_path[ref]:], ref], depth
            elif ref not in depth:
                on_path[ref] = len(path)
                path.append(ref)
                stack.append((ref, iter(_refs(consortia[ref], consortia))))
    return None, depth


def resolve_tree(name: str, consortia: Mapping[str, ConsortiumConfig],
                 backends: Mapping[str, Any]) -> dict[str, Any]:
    """The consortium expanded down to backends, as plain data (for `route consortium show`).
    A consortium used more than once is expanded at its first place only; later places are
    `{"name", "kind": "consortium", "ref": True}`, so the output grows with the config, not
    with the number of paths through it. Assumes the config passed check_consortia."""
    return _Resolver(consortia, backends).node(name)


class _Resolver:
    def __init__(self, consortia: Mapping[str, ConsortiumConfig], backends: Mapping[str, Any]):
        self.consortia, self.backends = consortia, backends
        self.shown: set[str] = set()
        self.calls: dict[tuple[str, bool], int] = {}

    def node(self, name: str) -> dict[str, Any]:
        # Recursion is bounded: check_consortia refuses nesting deeper than MAX_DEPTH.
        if name not in self.consortia:
            return {"name": name, "kind": "backend", "model": getattr(self.backends.get(name), "model", None)}
        if name in self.shown:
            return {"name": name, "kind": "consortium", "ref": True}
        self.shown.add(name)
        spec = self.consortia[name]
        members = []
        for member in spec.members:
            node = self.node(member.model)
            node.update(samples=member.n, system=member.system, temperature=member.temperature)
            members.append(node)
        return {
            "name": name,
            "kind": "consortium",
            "judging": spec.judging,
            "arbiter": self.node(spec.arbiter),
            "members": members,
            "calls_per_run": calls_per_run(name, self.consortia, memo=self.calls),
            "worst_case_calls": calls_per_run(name, self.consortia, worst=True, memo=self.calls),
            "budget": spec.effective_budget,
        }


def calls_per_run(name: str, consortia: Mapping[str, ConsortiumConfig], *, worst: bool = False,
                  memo: dict[tuple[str, bool], int] | None = None) -> int:
    """Model calls of one run without retries: every member sample and one arbiter call per
    iteration, expanded through nested consortia. `worst` uses max_iterations, else min.
    Memoised per consortium, so shared sub-consortia are counted in linear time."""
    memo = {} if memo is None else memo
    key = (name, worst)
    if name not in consortia:
        return 1
    if key not in memo:
        spec = consortia[name]
        per_round = sum(m.n * calls_per_run(m.model, consortia, worst=worst, memo=memo) for m in spec.members)
        per_round += calls_per_run(spec.arbiter, consortia, worst=worst, memo=memo)
        memo[key] = per_round * (spec.max_iterations if worst else spec.min_iterations)
    return memo[key]
