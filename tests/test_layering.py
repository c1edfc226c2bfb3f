"""Dependencies point one way: router -> policies, backends; policies and backends never import
router, nor each other (policies may use the shared data types and errors)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# The interface's data types: modules with no project imports of their own (checked below).
ALLOWED_FROM_BACKENDS_IN_POLICIES = {"backends.types", "backends.errors", "backends.capabilities"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("backends"), ids=lambda p: str(p.relative_to(ROOT)))
def test_backends_import_neither_router_nor_policies(path):
    bad = {m for m in _imports(path) if m.split(".")[0] in ("router", "policies")}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _modules("policies"), ids=lambda p: str(p.relative_to(ROOT)))
def test_policies_import_no_router_and_only_backend_data_types(path):
    imports = _imports(path)
    assert not {m for m in imports if m.split(".")[0] == "router"}, f"{path} imports router"
    from_backends = {m for m in imports if m.split(".")[0] == "backends"}
    assert from_backends <= ALLOWED_FROM_BACKENDS_IN_POLICIES, f"{path} imports {sorted(from_backends)}"


def test_bottom_layer_has_no_project_imports():
    for name in ("types.py", "errors.py"):
        imports = _imports(ROOT / "backends" / name)
        assert not {m for m in imports if m.split(".")[0] in ("backends", "policies", "router")}


@pytest.mark.parametrize("package", ["backends", "router"])
def test_public_names_are_all_importable(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


def test_backends_all_lists_every_public_type():
    import backends
    import backends.errors
    import backends.types

    exported = set(backends.__all__)
    for source in (backends.errors, backends.types):
        for name in source.__all__:
            if name[0].isupper():
                assert name in exported, f"backends.__all__ misses {name}"


def test_the_data_types_policies_may_use_import_nothing_of_the_project():
    for module in sorted(ALLOWED_FROM_BACKENDS_IN_POLICIES):
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        tree = ast.parse(source)
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m.split(".")[0] in ("router", "policies", "backends")}, module


# The Router's plugins receive the narrow parts they use (router/wiring.py, router/ports.py);
# none of them reaches back into the Router, not even for a type.
PLUGINS = [*_modules("router/learning"), *_modules("router/store"), *_modules("router/server"),
           ROOT / "router" / "inprocess.py"]


@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_do_not_import_the_router(path):
    bad = {m for m in _imports(path) if m in ("router.core", "router.serving")}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}: take the part it uses, or router.ports"


def test_the_router_module_imports_none_of_its_plugins_at_the_top():
    tree = ast.parse((ROOT / "router" / "core.py").read_text(encoding="utf-8"))
    top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    plugins = {m for m in top if m.startswith(("router.learning", "router.store", "router.server", "router.inprocess"))}
    assert not plugins, f"router/core.py imports {sorted(plugins)} at load time"
