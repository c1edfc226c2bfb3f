"""No test asserts how fast this machine is (issue 39: a 1 ms bound on the simulator's own work
failed at load 8 and the README's test command with it). A time read from a clock may be bounded
from below (a sleep never ends early) or, only beside a fault that lasts 10 s or forever, from
above by LATE_S ("cut, not waited out": tests/waiting.py); a speed claim lives in benchmarks/.

The check reads each test module's syntax: names holding a clock reading (time.perf_counter(),
time.monotonic(), time.time(), or a value computed from one, or returned by a helper of the same
module that reads one) may not be bounded from above by anything but an expression using LATE_S."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent
_CLOCKS = {"perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns", "time_ns"}


def _reads_clock(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CLOCKS
            and isinstance(node.func.value, ast.Name) and node.func.value.id in ("time", "loop"))


def _timed(node: ast.AST, names: set[str], helpers: set[str]) -> bool:
    for inner in ast.walk(node):
        if _reads_clock(inner) or (isinstance(inner, ast.Name) and inner.id in names):
            return True
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in helpers:
            return True
    return False


def _bound(targets: list[ast.expr], names: set[str]) -> None:
    for target in targets:
        names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _timed_names(function: ast.AST, helpers: set[str]) -> set[str]:
    """Names in `function` that hold a clock reading or something computed from one."""
    names: set[str] = set()
    for _ in range(3):  # values computed from values computed from a reading
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and _timed(node.value, names, helpers):
                _bound(node.targets, names)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None \
                    and _timed(node.value, names, helpers):
                _bound([node.target], names)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                  and isinstance(node.func.value, ast.Name) and any(_timed(a, names, helpers) for a in node.args)):
                names.add(node.func.value.id)
            elif isinstance(node, ast.comprehension) and _timed(node.iter, names, helpers):
                enumerated = isinstance(node.iter, ast.Call) and getattr(node.iter.func, "id", "") == "enumerate"
                targets = node.target.elts[1:] if enumerated and isinstance(node.target, ast.Tuple) else [node.target]
                _bound(list(targets), names)
    return names


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _clock_helpers(tree: ast.Module) -> set[str]:
    """Functions of the module whose return value holds a clock reading."""
    helpers: set[str] = set()
    for function in _functions(tree):
        names = _timed_names(function, set())
        if any(isinstance(n, ast.Return) and n.value is not None and _timed(n.value, names, set())
               for n in ast.walk(function)):
            helpers.add(function.name)
    return helpers


def _uses_late(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "LATE_S" for n in ast.walk(node))


def upper_bounds(source: str) -> list[tuple[int, str]]:
    """(line, comparison) for each assertion bounding a clock reading from above without LATE_S."""
    tree = ast.parse(source)
    helpers = _clock_helpers(tree)
    found = []
    for function in _functions(tree):
        names = _timed_names(function, helpers)
        for node in (n for n in ast.walk(function) if isinstance(n, ast.Assert)):
            for compare in (c for c in ast.walk(node.test) if isinstance(c, ast.Compare)):
                operands = [compare.left, *compare.comparators]
                for i, op in enumerate(compare.ops):
                    if isinstance(op, (ast.Lt, ast.LtE)):
                        small, big = operands[i], operands[i + 1]
                    elif isinstance(op, (ast.Gt, ast.GtE)):
                        small, big = operands[i + 1], operands[i]
                    else:
                        continue
                    if _timed(small, names, helpers) and not _timed(big, names, helpers) and not _uses_late(big):
                        found.append((node.lineno, ast.unparse(compare)))
    return found


def test_no_test_bounds_a_clock_reading_from_above():
    found = [f"{path.name}:{line}: {text}" for path in sorted(TESTS.glob("test_*.py"))
             for line, text in upper_bounds(path.read_text())]
    assert found == [], "speed claims belong in benchmarks/:\n" + "\n".join(found)


def test_the_check_finds_what_it_is_for():
    source = '''
import time
def stamps(client):
    start = time.perf_counter()
    return [(time.perf_counter() - start, e) for e in client]
async def test_fast():
    start = time.perf_counter()
    for _ in range(300):
        pass
    per_request = (time.perf_counter() - start) / 300
    assert per_request < 0.001
    first = [t for t, _ in stamps([1])]
    assert first[0] < 0.5
    assert 0.1 <= first[0]
    assert time.perf_counter() - start < 0.4 + LATE_S
'''
    assert upper_bounds(source) == [(11, "per_request < 0.001"), (13, "first[0] < 0.5")]


def test_hypothesis_times_no_example():
    """Its per-example deadline and "too slow" health check failed test_thinking.py at load 11."""
    from hypothesis import HealthCheck, settings

    assert settings().deadline is None
    assert HealthCheck.too_slow in settings().suppress_health_check
