"""What CI checks of the documentation (README.md and docs/), in one command:

    python docs/check.py

1. The site builds with `mkdocs build --strict`: a broken link, a missing anchor or a page
   left out of the nav fails it.
2. The generated references match the code: docs/reference/cli.md (the CLI) and
   docs/reference/configuration.md (the config schema), regenerated and compared.
3. Every code block runs its check:
   - shell (`sh`, `bash`): each `route ...` command parses against the CLI (options, commands,
     arguments; nothing is run), and each file of this repository a command names exists;
   - `yaml`: it loads, and a block shaped like a config (or a part of one: `routing:`, `log:`,
     ...) is valid as one (merged into the shipped config where it is a part), and a
     `profiles:` block is valid as `route sim --profiles` reads it;
   - `python`: it type-checks, every block at once, with mypy (a block using `await` at the top
     level is checked as the body of an async function); a block that opens with
     `# from PATH` quotes that file, and each of its lines must be found there.

Exit code 0 when everything holds; else one line per problem, naming the file and line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)\s*$")
_CONFIG_PARTS = ("backends", "routing", "consortia", "aliases", "log", "spend", "state", "server")
_REPO_PATH = re.compile(r"^(examples|benchmarks|docs|tests|router|backends|policies)/[\w./-]+$")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> Iterator[Block]:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        lang, start, body = None, 0, []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            fence = _FENCE.match(line.strip()) if line.lstrip().startswith("```") else None
            if fence and lang is None:
                lang, start, body = fence.group(1), number, []
            elif line.strip() == "```" and lang is not None:
                yield Block(path, start, lang, "\n".join(body))
                lang = None
            elif lang is not None:
                body.append(line)


# -- shell ------------------------------------------------------------------------------------


def _commands(text: str) -> Iterator[list[str]]:
    """Each command of a shell block, as words: comments dropped, continuations joined, pipes
    and `&&` split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in ("|", "&&", ";", "||", "<", ">", "&"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def _parse_route(args: list[str]) -> str | None:
    """Why `route ARGS` would not parse, or None. Nothing is run."""
    import typer

    from router.cli.app import app

    root = typer.main.get_command(app)
    if any(a in ("-h", "--help", "--version", "--install-completion", "--show-completion") for a in args):
        return None
    try:
        ctx = root.make_context("route", list(args))
        command = ctx
        name, sub, rest = root.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        while sub is not None:
            command = sub.make_context(name, rest, parent=command)
            if not hasattr(sub, "resolve_command") or not [*command._protected_args, *command.args]:
                break
            name, sub, rest = sub.resolve_command(command, [*command._protected_args, *command.args])
    except Exception as exc:  # click's UsageError, or its own copy of it
        return f"`route {shlex.join(args)}` does not parse: {exc}"
    return None


def check_shell(block: Block) -> list[str]:
    problems = []
    for words in _commands(block.text):
        while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
            words = words[1:]
        if not words:
            continue
        for word in words:
            if _REPO_PATH.match(word) and not (ROOT / word).exists() and "<" not in word:
                problems.append(f"{block.where}: `{word}` does not exist in the repository")
        if words[0] == "route":
            problem = _parse_route(words[1:])
            if problem:
                problems.append(f"{block.where}: {problem}")
    return problems


# -- yaml -------------------------------------------------------------------------------------


def check_yaml(block: Block) -> list[str]:
    import yaml

    from router.config_loader import load_config

    try:
        data = yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        return [f"{block.where}: not YAML: {exc}"]
    if isinstance(data, dict) and set(data) == {"profiles"}:
        return _check_profiles(block, data)
    if not isinstance(data, dict) or not set(data) <= set(_CONFIG_PARTS):
        return []
    config = data if {"backends", "routing"} <= set(data) else _merged(_shipped(), data)
    for name in set(re.findall(r"\$\{(\w+)\}", block.text)):
        os.environ.setdefault(name, _placeholder(name))
    try:
        load_config(config)
    except Exception as exc:
        return [f"{block.where}: not a valid config (part): {exc}"]
    return []


def _check_profiles(block: Block, data: dict) -> list[str]:
    """A `route sim --profiles` file."""
    from backends.simulator import load_profiles

    try:
        load_profiles(data)
    except Exception as exc:
        return [f"{block.where}: not valid simulator profiles: {exc}"]
    return []


def _merged(base: dict, part: dict) -> dict:
    """`part` laid over `base`, mapping by mapping (a snippet shows the keys it is about)."""
    out = dict(base)
    for key, value in part.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _shipped() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))


def _placeholder(name: str) -> str:
    if "REDIS" in name:
        return "redis://127.0.0.1:6379/0"
    if "PG" in name or "DSN" in name:
        return "postgresql://route@127.0.0.1:5432/route"
    return "a-placeholder-value-of-32-characters"


# -- python -----------------------------------------------------------------------------------


def _as_module(text: str) -> str:
    try:
        compile(text, "<snippet>", "exec")
        return text
    except SyntaxError:  # `await` at the top level: a snippet from inside async code
        body = "\n".join("    " + line for line in text.splitlines())
        return f"async def _snippet() -> None:\n{body}\n"


def check_excerpt(block: Block) -> list[str]:
    """A block opening with `# from PATH` quotes that file: each of its lines must be there."""
    first, _, rest = block.text.partition("\n")
    source = ROOT / first.removeprefix("# from ").strip()
    if not source.is_file():
        return [f"{block.where}: quotes {source.relative_to(ROOT)}, which does not exist"]
    lines = {line.strip() for line in source.read_text(encoding="utf-8").splitlines()}
    missing = [line.strip() for line in rest.splitlines() if line.strip() and line.strip() not in lines]
    return [f"{block.where}: `{line}` is not in {source.relative_to(ROOT)} any more" for line in missing]


def check_python(python_blocks: list[Block]) -> list[str]:
    if not python_blocks:
        return []
    with tempfile.TemporaryDirectory(prefix="route-docs-") as folder:
        names = {}
        for index, block in enumerate(python_blocks):
            name = f"snippet_{index}.py"
            Path(folder, name).write_text(_as_module(block.text), encoding="utf-8")
            names[name] = block
        result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--check-untyped-defs",
                                 "--no-error-summary", "--hide-error-context", "--no-incremental",
                                 *sorted(names)], cwd=folder, capture_output=True, text=True,
                                env={**os.environ, "MYPYPATH": str(ROOT)})
    problems = []
    for line in result.stdout.splitlines():
        match = re.match(r"(snippet_\d+\.py):(\d+): error: (.*)", line)
        if match:
            block = names[match.group(1)]
            problems.append(f"{block.where} (+{match.group(2)}): {match.group(3)}")
    return problems


# -- the site and the references -------------------------------------------------------------


def check_site() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="route-site-") as site:
        result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", site], cwd=ROOT,
                                capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if result.returncode == 0:
        return []
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line or "ERROR" in line]
    return [f"mkdocs build --strict: {line.strip()}" for line in lines] or ["mkdocs build --strict failed"]


def check_references() -> list[str]:
    from router.cli.reference import configuration, reference

    problems = []
    for kind, make, path in (("cli", reference, "docs/reference/cli.md"),
                             ("config", configuration, "docs/reference/configuration.md")):
        if (ROOT / path).read_text(encoding="utf-8") != make():
            problems.append(f"{path} is out of date: `python -m router.cli.reference {kind} > {path}`")
    return problems


def main() -> int:
    sys.path.insert(0, str(ROOT))
    every = list(blocks())
    problems = [*check_site(), *check_references()]
    for block in every:
        if block.lang in ("sh", "bash", "shell", "console"):
            problems += check_shell(block)
        elif block.lang == "yaml":
            problems += check_yaml(block)
    excerpts = [b for b in every if b.lang == "python" and b.text.startswith("# from ")]
    for block in excerpts:
        problems += check_excerpt(block)
    problems += check_python([b for b in every if b.lang == "python" and b not in excerpts])
    for problem in problems:
        print(problem)
    counts = {lang: sum(b.lang == lang for b in every) for lang in ("sh", "yaml", "python")}
    print(f"docs: {len(problems)} problem(s); checked the site, the references and {len(every)} code blocks "
          f"({counts['sh']} shell, {counts['yaml']} yaml, {counts['python']} python)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
