"""Hostile and careless configs: duplicate keys, alias bombs, deep nesting, long consortium
chains and wide diamonds are refused (exit 2, file:line, no traceback) or handled in linear
time -- through the real CLI in a subprocess, as a user would meet them.

Each subprocess has a timeout far below what the unguarded loader needed (an 8-level alias bomb
took more than 7 GB and minutes on main), so a regression fails by timing out rather than by a
tight timing margin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backends.errors import ConfigError
from router.config_loader import parse_config
from router.consortium.budget import MAX_DEPTH
from router.consortium.graph import calls_per_run, find_cycle, nesting_depths
from router.yaml_safe import MAX_NESTING

pytestmark = pytest.mark.unit

ROUTE = [sys.executable, "-m", "router.cli"]

HEAD = """\
backends:
  a: {kind: openai, model: m-a, base_url: "http://127.0.0.1:9/v1"}
  b: {kind: openai, model: m-b, base_url: "http://127.0.0.1:9/v1"}
routing:
  tiers:
    - name: all
      backends: [a]
"""


def route(*args: str, cwd: Path, timeout: float = 20):
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    return subprocess.run([*ROUTE, *args], check=False, capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def refused(tmp_path: Path, text: str, *args: str) -> str:
    """Run `route models` (or `args`) on `text`; assert a clean exit 2 and return stderr."""
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    result = route(*(args or ("models",)), "-c", str(path), cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and "hostile.yaml" in result.stderr
    return result.stderr


# Planned calls grow with the depth (and double per diamond level): budgets out of the way.
BUDGET = 2**63 - 1


def chain(length: int) -> str:
    """`length` consortia, each with the next as member; the last over backends only."""
    lines = ["consortia:"]
    for i in range(length):
        member = f"c{i + 1}" if i + 1 < length else "a"
        lines.append(f"  c{i}: {{members: [{member}, b], arbiter: b, budget: {BUDGET}}}")
    return HEAD + "\n".join(lines) + "\n"


def diamond(levels: int) -> str:
    """Each level uses the next level's two consortia twice over: 2**levels paths, 2*levels nodes."""
    lines = ["consortia:"]
    for i in range(levels):
        below = [f"l{i + 1}x", f"l{i + 1}y"] if i + 1 < levels else ["a", "b"]
        for side in "xy":
            lines.append(f"  l{i}{side}: {{members: [{below[0]}, {below[1]}], arbiter: b, budget: {BUDGET}}}")
    return HEAD + "\n".join(lines) + "\n"


@pytest.mark.integration
def test_a_duplicate_key_is_refused_naming_both_lines(tmp_path):
    text = HEAD.replace("  b: {kind: openai", "  a: {kind: litellm, model: x}\n  b: {kind: openai")
    err = refused(tmp_path, text)
    assert "'a' appears twice" in err and "line 2 and line 3" in err


def test_a_duplicate_key_in_a_nested_mapping_is_refused_too():
    with pytest.raises(ConfigError, match="'model' appears twice.*line 2 and line 2"):
        parse_config(HEAD.replace("model: m-a,", "model: m-a, model: m-z,"), "c.yaml")


def test_merge_keys_still_override_as_yaml_intends():
    text = HEAD.replace("  a: {kind: openai, model: m-a, base_url: \"http://127.0.0.1:9/v1\"}",
                        "  a: &base {kind: openai, model: m-a, base_url: \"http://127.0.0.1:9/v1\"}\n"
                        "  c: {<<: *base, model: m-c}")
    loaded = parse_config(text, "c.yaml")
    assert loaded.config.backends["c"].model == "m-c" and loaded.config.backends["c"].kind == "openai"


@pytest.mark.integration
@pytest.mark.parametrize("levels", [7, 8, 9])
def test_alias_bombs_are_refused(tmp_path, levels):
    lines = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"x{i}: &x{i} [{', '.join(f'*x{i - 1}' for _ in range(9))}]")
    err = refused(tmp_path, HEAD + "\n".join(lines) + "\n")
    assert "alias bomb" in err


def test_modest_aliases_still_load():
    text = HEAD + "x: &price {input: 1, output: 2}\n"
    with pytest.raises(ConfigError, match="unknown key 'x'"):  # the alias itself is fine; the key is not ours
        parse_config(text, "c.yaml")


@pytest.mark.integration
def test_a_5000_deep_list_is_refused_with_its_line(tmp_path):
    err = refused(tmp_path, HEAD + "deep: " + "[" * 5000 + "]" * 5000 + "\n")
    assert f"nested more than {MAX_NESTING} levels" in err and "hostile.yaml:8" in err


@pytest.mark.integration
def test_a_1500_long_consortium_chain_is_refused_by_the_depth_limit(tmp_path):
    err = refused(tmp_path, chain(1500))
    assert f"at most {MAX_DEPTH} levels deep" in err and "c0 -> c1 -> c2 -> ..." in err


def test_a_1500_long_cycle_is_found_without_recursion():
    text = chain(1500).replace("c1499: {members: [a, b]", "c1499: {members: [c0, b]")
    with pytest.raises(ConfigError, match="cycle: c0 -> c1 -> .* -> c1499 -> c0"):
        parse_config(text, "c.yaml")


def test_the_depth_limit_is_exact():
    parse_config(chain(MAX_DEPTH + 1), "c.yaml")  # MAX_DEPTH consortia below the outermost: fine
    with pytest.raises(ConfigError, match=f"nests {MAX_DEPTH + 1} consortia deep"):
        parse_config(chain(MAX_DEPTH + 2), "c.yaml")


def test_graph_helpers_are_linear_on_a_wide_diamond():
    consortia = parse_config(diamond(60), "c.yaml").config.consortia
    assert find_cycle(consortia) is None
    assert nesting_depths(consortia)["l0x"] == 60
    assert calls_per_run("l0x", consortia) == 2 ** 61 - 1  # every path counted, in linear time


@pytest.mark.integration
@pytest.mark.parametrize("levels", [16, 20, 40])
def test_consortium_show_on_a_diamond_shows_each_consortium_once(tmp_path, levels):
    path = tmp_path / "diamond.yaml"
    path.write_text(diamond(levels))
    shown = route("consortium", "show", "l0x", "--json", "-c", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    tree = json.loads(shown.stdout)
    expanded = json.dumps(tree).count('"judging"')
    assert expanded == 2 * levels - 1  # every consortium below l0x's twin, once
    assert tree["members"][1]["members"][0] == {"name": "l2x", "kind": "consortium", "ref": True, "samples": 1,
                                                "system": None, "temperature": None}
    human = route("consortium", "show", "l0x", "-c", str(path), cwd=tmp_path)
    assert human.returncode == 0 and "(as above)" in human.stdout


@pytest.mark.integration
def test_a_40_long_chain_loads_and_runs(sim, tmp_path):
    text = chain(40).replace("http://127.0.0.1:9/v1", sim.base_url).replace("m-a", "m-small")
    text = text.replace("m-b", "m-small")
    path = tmp_path / "chain.yaml"
    path.write_text(text.replace(", b], arbiter", "], arbiter"))  # one member each: no arbiter call
    result = route("-m", "c0", "--no-log", "-q", "--json", "hello", "-c", str(path), cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["text"]
