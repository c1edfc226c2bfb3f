"""What agent code touches is importable from `router`, and written down (issue 39: the chunk types
lived in backends.types, the in-process simulator in backends.simulator with no word on how to
start it, and an adapter imported without its extra was a bare ModuleNotFoundError)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import router

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def test_the_public_names_are_exactly_those_exported():
    from router import _HOMES

    assert sorted(router.__all__) == sorted(_HOMES) == router.__dir__()
    for name in router.__all__:
        assert getattr(router, name) is not None, name


def test_what_a_stream_yields_and_the_simulator_are_exported():
    from backends.types import DraftChunk, FinalChunk, TextChunk, ThinkingChunk, ToolCallChunk
    from router.simulator import Simulator

    assert (router.TextChunk, router.ThinkingChunk, router.ToolCallChunk, router.DraftChunk, router.FinalChunk) == (
        TextChunk, ThinkingChunk, ToolCallChunk, DraftChunk, FinalChunk)
    assert router.Simulator is Simulator


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("router.integrations.langchain", "langchain_core", "langchain"),
    ("router.integrations.openai_agents", "agents", "agents"),
    ("router.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
])
def test_an_adapter_without_its_framework_says_which_extra_to_install(monkeypatch, module, framework, extra):
    # What importing it finds when it is not installed: the package and every submodule an earlier
    # test may have loaded (a loaded submodule is found without its package).
    for name in [framework, *(m for m in sys.modules if m.startswith(framework + "."))]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module(module)
    assert f"pip install 'latency-router[{extra}]'" in str(caught.value)
    assert caught.value.name == framework


def test_each_adapters_extra_is_declared_with_its_framework():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, package in (("langchain", "langchain-core"), ("agents", "openai-agents"),
                           ("pydantic-ai", "pydantic-ai-slim")):
        assert any(req.startswith(package) for req in extras[extra]), extra


def test_the_agents_page_promises_langgraph_only_with_its_install():
    """The page named LangChain and LangGraph under one extra that brought only langchain-core."""
    import tomllib

    page = (ROOT / "docs" / "guide" / "agents.md").read_text()
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["langchain"]
    if "LangGraph" in page and not any(req.startswith("langgraph") for req in extra):
        for line in (line for line in page.splitlines() if "LangGraph" in line):
            assert "langgraph" in line.replace("LangGraph", ""), line


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_every_agents_sdk_snippet_turns_tracing_off():
    """The SDK uploads traces to OpenAI once OPENAI_API_KEY is set: a snippet to copy turns that off."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    snippets = [block for page in pages for block in _python_blocks(page.read_text())
                if re.search(r"^from agents import", block, re.MULTILINE)]
    assert snippets
    for block in snippets:
        assert "set_tracing_disabled(True)" in block or "tracing_disabled=True" in block, block
