"""The CLI as a map of its commands: `route W` lives in router/cli/commands/W.py, the table of
commands is what `route --help` lists, only the command being run is imported, and the options
several commands share are declared once (router/cli/options.py)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import typer

from router.cli.commands import COMMANDS

pytestmark = pytest.mark.integration  # subprocesses

CLI = Path(__file__).resolve().parent.parent / "router" / "cli"


def _built(name: str):
    import importlib

    return typer.main.get_command(importlib.import_module(f"router.cli.commands.{name}").app)


def test_each_command_lives_in_the_module_named_after_it_and_the_table_says_what_it_does() -> None:
    modules = sorted(p.stem for p in (CLI / "commands").glob("*.py") if p.stem != "__init__")
    assert modules == sorted(COMMANDS)
    for name, summary in COMMANDS.items():
        command = _built(name)
        assert command.name == name
        first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
        assert first_paragraph == summary, name  # `route --help` shows the table's line for it


def _loaded_after(args: list[str], tmp_path: Path) -> list[str]:
    """The command modules and pydantic modules a fresh `route ARGS` process imported."""
    code = (
        "import json, sys\nfrom router.cli.app import run\n"
        f"sys.argv = ['route', *{args!r}]\n"
        "try:\n    run()\nexcept SystemExit:\n    pass\n"
        "print('LOADED=' + json.dumps(sorted(m for m in sys.modules "
        "if m.startswith('router.cli.commands.') or m.split('.')[0] == 'pydantic')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "ROUTE_HOME": str(tmp_path)})
    line = [x for x in result.stdout.splitlines() if x.startswith("LOADED=")]
    assert line, result.stdout + result.stderr
    return json.loads(line[-1].removeprefix("LOADED="))


def test_help_imports_only_the_default_command(tmp_path: Path) -> None:
    # Before: `route --help` imported all eight command modules and built all 30-odd commands.
    assert _loaded_after(["--help"], tmp_path) == ["router.cli.commands.ask"]


def test_score_imports_its_own_command_and_no_pydantic(tmp_path: Path) -> None:
    # Before: every module was imported, and typer built a pydantic adapter per parameter.
    records = tmp_path / "prompts.jsonl"
    records.write_text('{"id": 1, "prompt": "hello"}\n')
    assert _loaded_after(["score", str(records)], tmp_path) == ["router.cli.commands.score"]


def _declared_options(path: Path) -> list[str]:
    """The option names of every typer.Option(...) call in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
            found += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return found


def test_shared_options_are_declared_once() -> None:
    shared = {"--json", "--config", "--quiet", "--no-log", "--since", "--weights"}
    elsewhere = {str(p.relative_to(CLI)): sorted(shared & set(_declared_options(p)))
                 for p in CLI.rglob("*.py") if p.name != "options.py"}
    assert {where: names for where, names in elsewhere.items() if names} == {}


def test_values_coerced_without_pydantic_are_the_ones_typer_makes(tmp_path: Path) -> None:
    # router/cli/coercion.py takes the plain cases; typer's own (pydantic) coercion is the oracle.
    seen: dict[str, object] = {}
    probe = typer.Typer()

    @probe.command()
    def values(count: Annotated[int | None, typer.Option(min=1)] = None,
               share: Annotated[float | None, typer.Option(max=2.0)] = None,
               name: Annotated[str | None, typer.Option()] = None,
               path: Annotated[Path | None, typer.Option()] = None) -> None:
        seen.update(count=count, share=share, name=name, path=path)

    from router.cli.coercion import without_pydantic

    cases = [["--count", "+7", "--share", ".5", "--name", "x y", "--path", str(tmp_path)],
             ["--count", "007", "--share", "-2"], ["--count", "0"], ["--share", "2.5"], ["--count", "1e3"], []]
    for args in cases:
        results = []
        for command in (typer.main.get_command(probe), without_pydantic(typer.main.get_command(probe))):
            seen.clear()
            try:
                command.main(args, prog_name="values", standalone_mode=False)
                refused = None
            except Exception as exc:  # typer's (vendored click's) BadParameter: compared by its words
                refused = exc.format_message() if hasattr(exc, "format_message") else repr(exc)
            results.append((refused, dict(seen)))
        assert results[0] == results[1], args
