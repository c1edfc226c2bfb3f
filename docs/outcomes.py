"""Commands a page shows with a stated outcome, run against the simulator and compared with it.

A page states what its commands do in an HTML comment right before the code block (hidden on the
site and on GitHub), one line per command, `COMMAND => OUTCOME; OUTCOME; ...`:

    <!-- outcomes
    route "Why is the sky blue?" => exit 0; backend diffusiongemma
    route --explain "Prove that ..." => tier frontier
    route "Prove that ..." => downgraded; backend diffusiongemma
    route -m local-panel "..." => unjudged
    route "..." => needs a model
    python => stdout has "diffusiongemma"
    -->

The command is written as in the block (compared word by word); `python` stands for the block
itself when it is a Python block. Outcomes:

    exit N               the exit code
    backend NAME         who answered (the line `NAME · N tok · ...` on stderr, or --json's `backend`)
    tier NAME            the tier the decision chose (`tier 'NAME'` in the decision, --explain's too)
    downgraded           a weaker tier answered and the one-line note said so; `not downgraded`: no note
    judged / unjudged    a consortium's verdict line: its arbiter ranked the answers / failed to
    stdout has "TEXT"    (and `stderr has "TEXT"`) the text appears there
    nothing connected    run with nothing listening where the shipped config looks for a local
                         model (as on a fresh machine); otherwise the simulator answers there
    needs a model        not run: the outcome needs a real model or key (counted, not checked)

Each command runs as a user would run it (`route` in a process of its own, in the repository's
folder, with no API keys in its environment and a fresh ROUTE_HOME) with the shipped config
pointed at the SIMULATED server (`route sim`'s profiles, in this process, on a free port); a
config a command names with `-c` is pointed there too. Every `route` command in a page that sends
a prompt to a model must carry an outcome line (or `needs a model`): what it does is then never
left to prose. Input piped into a command is not reproduced (stdin is empty).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Claim", "Run", "claims", "compare", "is_prompt", "run_claims", "unclaimed_prompts"]

ROOT = Path(__file__).resolve().parent.parent
_LOCAL_URL = "http://127.0.0.1:8000"  # where the shipped config (and `route sim`) put the local model
_OUTCOME = re.compile(r'^(exit \d+|backend \S+|tier \S+|downgraded|not downgraded|judged|unjudged|'
                      r'(stdout|stderr) has "[^"]*"|nothing connected|needs a model)$')
_SECRETS = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_SECRET_ACCESS_KEY)$")


@dataclass
class Claim:
    """One command of a block and what its page says it does."""

    where: str  # file:line of the block
    command: list[str]  # ["python"] for the block itself
    outcomes: list[str]
    text: str = ""  # the block, for `python`

    @property
    def shown(self) -> str:
        return "the Python block" if self.command == ["python"] else shlex.join(self.command)

    @property
    def runs(self) -> bool:
        return "needs a model" not in self.outcomes


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    facts: dict[str, object] = field(default_factory=dict)


def parse_note(note: str, where: str) -> tuple[list[tuple[list[str], list[str]]], list[str]]:
    """(command words, outcomes) per line of an `outcomes` comment, and what is wrong with it."""
    lines, problems = [], []
    for line in filter(str.strip, note.splitlines()[1:]):
        parsed = _note_line(line, where)
        if isinstance(parsed, str):
            problems.append(parsed)
        else:
            lines.append(parsed)
    return lines, problems


def _note_line(line: str, where: str) -> tuple[list[str], list[str]] | str:
    """One `COMMAND => OUTCOME; ...` line as (command words, outcomes), or what is wrong with it."""
    command, arrow, stated = line.partition(" => ")
    outcomes = [o.strip() for o in stated.split(";") if o.strip()]
    bad = [o for o in outcomes if not _OUTCOME.match(o)]
    if not arrow or not outcomes or bad:
        return (f"{where}: outcome line `{line.strip()}` is not `COMMAND => OUTCOME; ...` with outcomes "
                f"from docs/outcomes.py{f' (unknown: {bad[0]})' if bad else ''}")
    try:
        return shlex.split(command.strip()), outcomes
    except ValueError as exc:
        return f"{where}: outcome line `{line.strip()}`: {exc}"


def claims(block, commands: list[list[str]]) -> tuple[list[Claim], list[str]]:
    """The claims of a block whose comment states outcomes; a claim about a command the block
    does not show is a problem (the page changed and its note did not)."""
    if not block.note or not block.note.startswith("outcomes"):
        return [], []
    stated, problems = parse_note(block.note, block.where)
    found = []
    for command, outcomes in stated:
        if command == ["python"] and block.lang == "python":
            found.append(Claim(block.where, command, outcomes, block.text))
        elif command in commands:
            found.append(Claim(block.where, command, outcomes))
        else:
            problems.append(f"{block.where}: the outcomes note names `{shlex.join(command)}`, which the block "
                            "below it does not show")
    return found, problems


def is_prompt(args: list[str]) -> bool:
    """Whether `route ARGS` sends a prompt to a model (a placeholder prompt, `...`, does not count)."""
    import typer

    from router.cli.app import app
    from router.cli.dispatch import NotAPrompt, dispatch

    if "..." in args or "--explain" in args or any(a in ("-h", "--help", "--version") for a in args):
        return False
    try:
        return dispatch(typer.main.get_command(app), args)[:1] == ["ask"]
    except NotAPrompt:
        return False


def unclaimed_prompts(block, commands: list[list[str]], found: list[Claim]) -> list[str]:
    claimed = [c.command for c in found]
    return [f"{block.where}: `{shlex.join(words)}` sends a prompt, but the page states no outcome for it: add "
            f"an `outcomes` note before the block (docs/outcomes.py), or `=> needs a model`"
            for words in commands if words[:1] == ["route"] and words not in claimed and is_prompt(words[1:])]


# -- running ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _simulator() -> Iterator[str]:
    """`route sim` in this process, on a free port: its profiles (each able to judge as an arbiter)."""
    from router.simulator import Simulator

    with Simulator() as sim:
        yield sim.url


@contextlib.contextmanager
def _refusing() -> Iterator[str]:
    """A loopback address where connecting is refused for as long as the block runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _pointed(text: str, url: str) -> str:
    return text.replace(_LOCAL_URL, url)


def _environment(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRETS.search(k) and k != "ROUTE_CONFIG"}
    return {**env, "ROUTE_HOME": str(home), "ROUTE_CONFIG": str(config), "COLUMNS": "250", "NO_COLOR": "1",
            "TERM": "dumb", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _argv(claim: Claim, folder: Path, url: str) -> list[str]:
    """The command line to run: `route` is this environment's; a config it names is pointed at `url`."""
    if claim.command == ["python"]:
        return [sys.executable, "-c", claim.text]
    words = list(claim.command)
    for i, word in enumerate(words[:-1]):
        source = ROOT / words[i + 1]
        if word in ("-c", "--config") and source.is_file():
            copy = folder / source.name
            copy.write_text(_pointed(source.read_text(encoding="utf-8"), url), encoding="utf-8")
            words[i + 1] = str(copy)
    return [str(Path(sys.executable).parent / "route"), *words[1:]]


def _run(claim: Claim, url: str) -> Run:
    with tempfile.TemporaryDirectory(prefix="route-docs-run-") as temp:
        folder = Path(temp)
        config = folder / "shipped.yaml"
        config.write_text(_pointed((ROOT / "config.yaml").read_text(encoding="utf-8"), url), encoding="utf-8")
        try:
            done = subprocess.run(_argv(claim, folder, url), cwd=ROOT, env=_environment(folder / "home", config),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)
        except subprocess.TimeoutExpired as exc:
            return Run(-1, str(exc.stdout or ""), f"did not finish within {exc.timeout:.0f} s")
    return Run(done.returncode, done.stdout, done.stderr)


def run_claims(found: list[Claim]) -> dict[int, Run]:
    """Every claim that can run, by its index: against the simulator, or with nothing connected."""
    runnable = [(i, c) for i, c in enumerate(found) if c.runs]
    results: dict[int, Run] = {}
    with _simulator() as sim, _refusing() as nothing, ThreadPoolExecutor(max_workers=4) as pool:
        futures = {i: pool.submit(_run, c, nothing if "nothing connected" in c.outcomes else sim) for i, c in runnable}
        for i, future in futures.items():
            results[i] = future.result()
    return results


# -- comparing --------------------------------------------------------------------------------


def _json_doc(run: Run) -> dict | None:
    with contextlib.suppress(ValueError):
        doc = json.loads(run.stdout)
        return doc if isinstance(doc, dict) else None
    return None


def answered_by(run: Run) -> str | None:
    doc = _json_doc(run)
    if doc is not None:
        return doc.get("backend")
    found = re.search(r"^(\S+) · \d+ tok · ", run.stderr, re.MULTILINE)
    return found.group(1) if found else None


def routed_tier(run: Run) -> str | None:
    doc = _json_doc(run)
    if doc is not None:
        return (doc.get("decision") or {}).get("tier")
    found = re.search(r"tier '([^']+)'", run.stdout + run.stderr)
    return found.group(1) if found else None


def downgrade_note(run: Run) -> str | None:
    found = re.search(r"^route: warning: (downgraded: .*)$", run.stderr, re.MULTILINE)
    return found.group(1) if found else None


def verdict(run: Run) -> str | None:
    found = re.search(r"^(verdict .*)$", run.stderr, re.MULTILINE)
    return found.group(1) if found else None


def _decision(run: Run) -> str:
    """The decision line a run printed, for context in a problem."""
    found = re.search(r"^→ (.*)$", run.stderr, re.MULTILINE)
    return f" (decision: {found.group(1)})" if found else ""


def _differs(outcome: str, run: Run) -> str | None:
    """How `run` differs from `outcome`, or None when it does what the page says."""
    kind, _, value = outcome.partition(" ")
    check = _CHECKS.get(outcome) or _CHECKS.get(kind)
    # `nothing connected` and `needs a model` are how it runs, not what it does
    return check(value, run) if check is not None else None


def _exit(value: str, run: Run) -> str | None:
    return None if run.code == int(value) else f"exited {run.code}, not {value}"


def _backend(value: str, run: Run) -> str | None:
    who = answered_by(run)
    return None if who == value else f"{who or 'no backend'} answered, not {value}{_decision(run)}"


def _tier(value: str, run: Run) -> str | None:
    tier = routed_tier(run)
    return None if tier == value else f"was routed to tier {tier!r}, not {value!r}{_decision(run)}"


def _downgraded(_: str, run: Run) -> str | None:
    note = downgrade_note(run)
    return None if note else f"printed no downgrade note ({answered_by(run)} answered){_decision(run)}"


def _not_downgraded(_: str, run: Run) -> str | None:
    note = downgrade_note(run)
    return None if note is None else f"printed a downgrade note: {note}"


def _judging(unjudged: bool) -> Callable[[str, Run], str | None]:
    def check(_: str, run: Run) -> str | None:
        line = verdict(run)
        if line is None:
            return "printed no verdict line"
        return None if ("unjudged" in line) == unjudged else f"printed `{line}`"

    return check


def _printed(stream: str) -> Callable[[str, Run], str | None]:
    def check(value: str, run: Run) -> str | None:
        text = value.removeprefix('has "').removesuffix('"')
        return None if text in getattr(run, stream) else f"did not print {text!r} on {stream}"

    return check


_CHECKS: dict[str, Callable[[str, Run], str | None]] = {
    "exit": _exit, "backend": _backend, "tier": _tier, "downgraded": _downgraded,
    "not downgraded": _not_downgraded, "judged": _judging(False), "unjudged": _judging(True),
    "stdout": _printed("stdout"), "stderr": _printed("stderr"),
}


def compare(claim: Claim, run: Run) -> list[str]:
    """One problem per outcome the run did not have, naming the page, the command and both sides."""
    how = "with nothing connected" if "nothing connected" in claim.outcomes else "against the simulator"
    problems = []
    for outcome in claim.outcomes:
        difference = _differs(outcome, run)
        if difference:
            problems.append(f"{claim.where}: `{claim.shown}`: the page says `{outcome}`; run {how} it {difference}")
    if problems and run.code not in (0, 2, 3) and run.stderr:
        problems.append(f"{claim.where}: `{claim.shown}` stderr: {run.stderr.strip().splitlines()[-1]}")
    return problems
