"""What CI checks of the documentation (README.md and docs/), in one command:

    python docs/check.py

1. The site builds with `mkdocs build --strict`: a broken link, a missing anchor or a page
   left out of the nav fails it.
2. The generated references match the code: docs/reference/cli.md (the CLI),
   docs/reference/configuration.md (the config schema) and docs/reference/consortium.md (a
   consortium's keys), regenerated and compared.
3. Every code block runs its check:
   - shell (`sh`, `bash`): each `route ...` command parses against the CLI (options, commands,
     arguments; nothing is run), and each file of this repository a command names exists;
   - `yaml`: it loads, and a block shaped like a config (or a part of one: `routing:`, `log:`,
     ...) is valid as one (merged into the shipped config where it is a part), and a
     `profiles:` block is valid as `route sim --profiles` reads it;
   - `python`: it type-checks, every block at once, with mypy, and runs as a script would (no
     `await` outside a function: a reader pastes it into a file); a block that opens with
     `# from PATH` quotes that file, and each of its lines must be found there.

4. Every command a page states an outcome for runs, and does what the page says (docs/outcomes.py:
   the note before a block, the simulator, the comparison); a `route` command that sends a prompt
   with no stated outcome is a problem of its own.

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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)\s*$")
_CONFIG_PARTS = ("backends", "routing", "consortia", "aliases", "log", "spend", "state", "server")
_SHELL = ("sh", "bash", "shell", "console")
_REPO_PATH = re.compile(r"^(examples|benchmarks|docs|tests|router|backends|policies)/[\w./-]+$")


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str
    note: str | None = None  # the HTML comment just before the fence (`outcomes ...`), if any

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(paths: list[Path] | None = None) -> Iterator[Block]:
    for path in paths or pages():
        yield from _blocks_of(path)


def _comment(lines: list[str], number: int) -> tuple[str, int]:
    """The HTML comment opening on line `number` (1-based, already read), and the line after it."""
    comment = [lines[number - 1].strip().removeprefix("<!--")]
    while "-->" not in comment[-1] and number < len(lines):
        comment.append(lines[number].strip())
        number += 1
    return "\n".join(comment).split("-->")[0].strip(), number


def _blocks_of(path: Path) -> Iterator[Block]:
    lang, start, body = None, 0, []
    note: str | None = None  # an HTML comment, kept until the next line that is not blank
    lines = path.read_text(encoding="utf-8").splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        fence = _FENCE.match(line.strip()) if line.lstrip().startswith("```") else None
        if fence and lang is None:
            lang, start, body = fence.group(1), number, []
        elif line.strip() == "```" and lang is not None:
            yield Block(path, start, lang, "\n".join(body), note)
            lang, note = None, None
        elif lang is not None:
            body.append(line)
        elif line.strip().startswith("<!--"):
            note, number = _comment(lines, number)
        elif line.strip():
            note = None


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


def _without_assignments(words: list[str]) -> list[str]:
    while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
        words = words[1:]
    return words


def check_shell(block: Block) -> list[str]:
    problems = []
    for words in map(_without_assignments, _commands(block.text)):
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
    """A `route sim --profiles` file, whose profiles the shipped config would use: a profile keyed
    by a backend's name (the simulator is sent its model) is never used."""
    from backends.simulator import load_profiles
    from router.cli.commands.sim import unasked_profiles
    from router.config_loader import load_config

    try:
        profiles = load_profiles(data)
    except Exception as exc:
        return [f"{block.where}: not valid simulator profiles: {exc}"]
    backends = load_config(str(ROOT / "config.yaml")).config.backends
    return [f"{block.where}: {note}" for note in unasked_profiles(profiles, backends) if "backend's name" in note]


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


def check_compiles(block: Block) -> list[str]:
    """A block a reader pastes into a file must run there: no `await` outside an async function."""
    try:
        compile(block.text, str(block.path), "exec")
    except SyntaxError as exc:
        line = block.line + (exc.lineno or 0)
        return [f"{_shown(block.path)}:{line}: not a Python script ({exc.msg}); a block with `await` "
                "shows it inside `async def main()` run by `asyncio.run(main())`"]
    return []


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
    """Every block at once, with the project's mypy settings (pyproject.toml) and its cache in
    .mypy_cache, so the code the blocks import is analysed once for this and for CI's `mypy`."""
    if not python_blocks:
        return []
    with tempfile.TemporaryDirectory(prefix="route-docs-") as folder:
        names = {}
        for index, block in enumerate(python_blocks):
            name = f"snippet_{index}.py"
            Path(folder, name).write_text(block.text, encoding="utf-8")
            names[name] = block
        result = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context",
                                 *(str(Path(folder, name)) for name in sorted(names))], cwd=ROOT,
                                capture_output=True, text=True)
    problems = []
    for line in result.stdout.splitlines():
        match = re.match(r".*?(snippet_\d+\.py):(\d+): error: (.*)", line)
        if match:
            block = names[match.group(1)]
            problems.append(f"{block.where} (+{match.group(2)}): {match.group(3)}")
    return problems


# -- the site and the references -------------------------------------------------------------


def check_site() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="route-site-") as site:
        result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", site], cwd=ROOT,
                                capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
        published = published_sources(Path(site))
    problems = [f"the site publishes {name}: exclude it in mkdocs.yml (exclude_docs)" for name in published]
    if result.returncode == 0:
        return problems
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line or "ERROR" in line]
    # Without a WARNING line the build stopped before building (mkdocs missing, a plugin's error): say its last words.
    last = [line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()][-1:]
    return problems + ([f"mkdocs build --strict: {line.strip()}" for line in lines]
                       or [f"mkdocs build --strict failed: {' '.join(last) or 'no output'}"])


def published_sources(site: Path) -> list[str]:
    """Files of docs/ that are no page and no image, copied into the built site as they are."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.suffix in (".py", ".pyc"))


def check_references() -> list[str]:
    from router.cli.reference import configuration, consortium, reference

    problems = []
    for kind, make, path in (("cli", reference, "docs/reference/cli.md"),
                             ("config", configuration, "docs/reference/configuration.md"),
                             ("consortium", consortium, "docs/reference/consortium.md")):
        if (ROOT / path).read_text(encoding="utf-8") != make():
            problems.append(f"{path} is out of date: `python -m router.cli.reference {kind} > {path}`")
    return problems


def check_outcomes(every: list[Block]) -> tuple[list[str], int, int]:
    """Problems, and how many stated outcomes ran and how many need a real model (docs/outcomes.py)."""
    import outcomes

    problems: list[str] = []
    found: list[outcomes.Claim] = []
    for block in every:
        commands = [_without_assignments(words) for words in _commands(block.text)] if block.lang in _SHELL else []
        claimed, wrong = outcomes.claims(block, commands)
        problems += wrong + (outcomes.unclaimed_prompts(block, commands, claimed) if commands else [])
        found += claimed
    runs = outcomes.run_claims(found)
    for index, run in sorted(runs.items()):
        problems += outcomes.compare(found[index], run)
    return problems, len(runs), len(found) - len(runs)


def main() -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "docs"))
    every = list(blocks())
    excerpts = [b for b in every if b.lang == "python" and b.text.startswith("# from ")]
    scripts = [b for b in every if b.lang == "python" and b not in excerpts]
    # The site and mypy are processes of their own: they run while the pages' commands do.
    with ThreadPoolExecutor(max_workers=2) as pool:
        site, types = pool.submit(check_site), pool.submit(check_python, scripts)
        problems = check_references()
        for block in every:
            if block.lang in _SHELL:
                problems += check_shell(block)
            elif block.lang == "yaml":
                problems += check_yaml(block)
        for block in excerpts:
            problems += check_excerpt(block)
        for block in scripts:
            problems += check_compiles(block)
        stated, ran, need_model = check_outcomes(every)
        problems = site.result() + problems + types.result() + stated
    for problem in problems:
        print(problem)
    counts = {lang: sum(b.lang == lang for b in every) for lang in ("sh", "yaml", "python")}
    print(f"docs: {len(problems)} problem(s); checked the site, the references and {len(every)} code blocks "
          f"({counts['sh']} shell, {counts['yaml']} yaml, {counts['python']} python); ran {ran} command(s) "
          f"with a stated outcome ({need_model} more need a real model)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
