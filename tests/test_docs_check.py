"""The docs check (docs/check.py, docs/outcomes.py) runs what a page states an outcome for and fails
when the outcome differs (issue 39: the README promised a downgrade note its demo never showed,
and the check only parsed the command). Pages here are written into tmp_path; the commands run
as `route` processes against the simulator, as `python docs/check.py` runs them."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        spec = importlib.util.spec_from_file_location(f"docs_{name}", ROOT / "docs" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "docs"))


check = _load("check")
outcomes = _load("outcomes")


def _page(tmp_path: Path, text: str) -> list:
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(text))
    return list(check.blocks([path]))


def _stated(blocks) -> list[str]:
    """What check_outcomes says of these blocks (it runs the claims against the simulator)."""
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        return check.check_outcomes(blocks)[0]
    finally:
        sys.path.remove(str(ROOT / "docs"))


def _length_config(tmp_path: Path) -> Path:
    """The shipped three tiers on the simulator's port, scored by length: a long prompt is for
    `frontier`, whose key is unset, so a weaker tier answers it."""
    path = tmp_path / "length.yaml"
    path.write_text(textwrap.dedent("""\
        backends:
          local: {kind: openai, model: m-local, base_url: "http://127.0.0.1:8000/v1", max_retries: 0}
          frontier: {kind: anthropic, model: claude-sonnet-4-5, api_key: "${ANTHROPIC_API_KEY}", max_retries: 0}
        routing:
          scorer: {kind: length, threshold_chars: 20}
          tiers: [{name: local, below: 0.5, backends: [local]}, {name: frontier, backends: [frontier]}]
        """))
    return path


def test_an_outcome_that_differs_fails_naming_the_page_the_command_and_what_happened(tmp_path):
    blocks = _page(tmp_path, """\
        <!-- outcomes
        route "hi" => exit 0; backend frontier
        -->
        ```sh
        route "hi"      # answered by the frontier model
        ```
        """)
    problems = _stated(blocks)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{tmp_path / 'page.md'}:4: `route hi`: the page says `backend frontier`; run "
                                  "against the simulator it diffusiongemma answered, not frontier (decision: "
                                  "diffusiongemma · score "), problems


def test_the_promised_downgrade_note_is_checked_both_ways(tmp_path):
    config = _length_config(tmp_path)
    promised = _page(tmp_path, f"""\
        <!-- outcomes
        route -c {config} "Prove that sqrt(2) is irrational" => exit 0; downgraded; backend local
        route -c {config} "hi" => exit 0; downgraded
        -->
        ```sh
        route -c {config} "Prove that sqrt(2) is irrational"
        route -c {config} "hi"
        ```
        """)
    problems = _stated(promised)
    assert len(problems) == 1, problems
    assert "`route -c" in problems[0] and "hi`: the page says `downgraded`; run against the simulator it printed " \
           "no downgrade note (local answered)" in problems[0]


def test_nothing_connected_runs_with_no_local_server(tmp_path):
    blocks = _page(tmp_path, """\
        <!-- outcomes
        route "Why is the sky blue?" => nothing connected; exit 3; stderr has "tried diffusiongemma, mercury-2, frontier"
        -->
        ```sh
        pip install . && route "Why is the sky blue?"
        ```
        """)
    assert _stated(blocks) == []


def test_a_prompt_with_no_stated_outcome_and_a_note_about_another_command_are_problems(tmp_path):
    blocks = _page(tmp_path, """\
        <!-- outcomes
        route "Why is the sky red?" => exit 0
        -->
        ```sh
        route "Why is the sky blue?"   # prose only
        route -m frontier "..."        # a placeholder is no prompt
        route --explain "Why?"         # calls no model
        route models
        ```
        """)
    problems = _stated(blocks)
    assert len(problems) == 2, problems
    assert "names `route 'Why is the sky red?'`, which the block below it does not show" in problems[0]
    assert "`route 'Why is the sky blue?'` sends a prompt, but the page states no outcome for it" in problems[1]


def test_an_outcome_line_outside_the_vocabulary_is_refused(tmp_path):
    blocks = _page(tmp_path, """\
        <!-- outcomes
        route "hi" => answers quickly
        -->
        ```sh
        route "hi"
        ```
        """)
    problems = _stated(blocks)
    assert any("unknown: answers quickly" in p for p in problems), problems


def test_a_python_block_runs_and_its_output_is_compared(tmp_path):
    blocks = _page(tmp_path, """\
        <!-- outcomes
        python => exit 0; stdout has "the answer is 42"
        -->
        ```python
        print("the answer is", 6 * 7)
        ```
        """)
    assert _stated(blocks) == []
    wrong = _page(tmp_path, """\
        <!-- outcomes
        python => stdout has "the answer is 43"
        -->
        ```python
        print("the answer is", 6 * 7)
        ```
        """)
    assert ["did not print 'the answer is 43' on stdout" in p for p in _stated(wrong)] == [True]


def test_a_block_with_top_level_await_is_no_script(tmp_path):
    blocks = _page(tmp_path, """\
        ```python
        from router import Router

        result = await Router.from_config().acomplete("hi")
        ```
        """)
    problems = check.check_compiles(blocks[0])
    assert len(problems) == 1 and "'await' outside function" in problems[0] and "asyncio.run(main())" in problems[0]


def test_a_profile_keyed_by_a_backend_name_is_a_problem(tmp_path):
    blocks = _page(tmp_path, """\
        ```yaml
        profiles:
          diffusiongemma: {ttft_s: 0.05}
          google/diffusiongemma-26B-A4B-it: {ttft_s: 0.05}
          flaky-model: {fault: "500"}
        ```
        """)
    problems = check.check_yaml(blocks[0])
    assert len(problems) == 1, problems
    assert "profile 'diffusiongemma' is a backend's name" in problems[0]
    assert "'google/diffusiongemma-26B-A4B-it'" in problems[0]


def test_the_built_site_publishes_no_source_file(tmp_path):
    """docs/check.py and docs/outcomes.py live beside the pages; the site is for the pages."""
    assert check.check_site() == []
    (tmp_path / "guide").mkdir()
    (tmp_path / "check.py").write_text("")
    (tmp_path / "guide" / "index.html").write_text("")
    assert check.published_sources(tmp_path) == ["check.py"]
