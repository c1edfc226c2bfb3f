"""Harness invariance: a prompt scores the same bare and wrapped in any recorded client's harness.

    .venv/bin/python benchmarks/harness.py [DIR] [--per-set 250] [--seed 37] [--all]

Each prompt of the routing sets in DIR (default ../shared/data/routing; a fixed-seed sample of
`--per-set` prompts of each set, `--all` for every prompt) is put in the place of the user's
words in every request body recorded from a real client (tests/data/clients), parsed by the
server's own dialect of that body's protocol into the router's messages, and scored by the
shipped scorer: once as the router will (the task read by policies/task.py, `read_task(...)
.messages`), once as it did before (the whole conversation), and compared with the bare prompt.
A body is taken as the client's first call of the task (what follows the user's turn in a
recorded tool round trip is dropped, the client's system messages kept); `+loop` rows take the
recorded round trip whole, tool call and result included. For the two second-turn bodies the
bare baseline is the same conversation without the harness: the first task, the model's answer,
then the prompt. Claude Code's session-title request is left out: it is a side request about
the task, not a turn of it.

Per body: the share of prompts scoring within 0.02 of the bare prompt (target >= 95%), the share
on the same tier under the shipped config's boundaries (>= 98%), and the APGR of the wrapped
scores less that of the bare ones on the same prompts (within 0.01). The same three without the
task read show what the harness does to the score. Exits 1 when a target is missed with the task read.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from backends.types import Message
from benchmarks.routing_data import routing_sets
from policies.complexity import ComplexityScorer
from policies.routing_eval import apgr, quality_curve
from policies.task import read_task
from router.config_loader import load_config
from router.server.protocols.chat import ChatDialect
from router.server.protocols.messages import MessagesDialect
from router.server.protocols.responses import ResponsesDialect

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "clients"
DIALECTS: dict[str, ChatDialect | MessagesDialect | ResponsesDialect] = {"/v1/chat/completions": ChatDialect(), "/v1/messages": MessagesDialect(),
            "/v1/responses": ResponsesDialect()}
# What the user typed in each recorded session (the README of the corpus): first turns, and the
# second turns of the sessions recorded over two turns, with the answer every first turn got
# from the recording upstream (tests/data/clients/record.py).
FIRST_TASKS = ("Run the shell command 'echo corpus-ok' and tell me what it printed.",
               "What is the weather in Paris right now?", "Make greet() say hello instead of hi.",
               "Why does greet() concatenate strings instead of using an f-string?", "hi")
SECOND_TASKS = ("Now also add a docstring to greet() explaining the argument.",
                "Now explain what the echo builtin does with the -n flag.")
ANSWER = "Done: the command printed corpus-ok."
SIDE_REQUESTS = ("claude-code-title",)
PLACEHOLDER = "@@ROUTE-HARNESS-TASK@@"
WITHIN, SAME_TIER, APGR_DELTA = 0.02, 0.98, 0.01
WITHIN_SHARE = 0.95


@dataclass(frozen=True, slots=True)
class Wrapper:
    """One recorded body with the user's words replaced by PLACEHOLDER, ready to fill in."""

    name: str
    path: str
    template: bytes
    history: tuple[Message, ...]  # the bare conversation before the prompt (second turns)

    def body(self, prompt: str) -> bytes:
        return self.template.replace(PLACEHOLDER.encode(), orjson.dumps(prompt)[1:-1])

    def bare(self, prompt: str) -> list[Message]:
        return [*self.history, {"role": "user", "content": prompt}]


def _items(body: dict[str, Any], path: str) -> list[dict[str, Any]]:
    return body["input"] if path == "/v1/responses" else body["messages"]


def _text_slots(item: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(holder, key) of each text of a user item, in order."""
    if item.get("role") != "user":
        return []
    content = item.get("content")
    if isinstance(content, str):
        return [(item, "content")]
    return [(part, "text") for part in content or () if isinstance(part, dict) and isinstance(part.get("text"), str)]


def _typed(text: str, tasks: tuple[str, ...]) -> str | None:
    """The task `text` holds as the user typed it: the whole text, quoted (OpenCode's `run`),
    or at its start with the client's text after a line break (aider)."""
    for task in tasks:
        if text in (task, f'"{task}"') or text.startswith(task + "\n"):
            return task
    return None


def _latest_task(items: list[dict[str, Any]]) -> tuple[int, dict[str, Any], str, str, bool] | None:
    """(item index, holder, key, task, whether it is a second turn) of the latest task typed."""
    for tasks in (SECOND_TASKS, FIRST_TASKS):
        found = [(i, holder, key, task) for i, item in enumerate(items) for holder, key in _text_slots(item)
                 if (task := _typed(holder[key], tasks)) is not None]
        if found:
            return (*found[-1], tasks is SECOND_TASKS)
    return None


def wrapper(fixture: Path, loop: bool) -> Wrapper | None:
    """The fixture's body with its latest task in PLACEHOLDER; None when it holds no known task.
    Unless `loop`, what follows the task's turn is dropped, but for system messages (Claude Code
    sends one after the first user turn)."""
    record = json.loads(fixture.read_text())
    body, path = record["body"], record["path"]
    items = _items(body, path)
    found = _latest_task(items)
    if found is None:
        return None
    at, holder, key, task, second = found
    holder[key] = holder[key].replace(task, PLACEHOLDER, 1)
    if not loop:
        items[at + 1:] = [item for item in items[at + 1:] if item.get("role") in ("system", "developer")]
    history = _bare_history(items[:at]) if second else ()
    return Wrapper(fixture.stem + (" +loop" if loop else ""), path, orjson.dumps(body), history)


def _bare_history(before: list[dict[str, Any]]) -> tuple[Message, ...]:
    """A second turn's bare baseline before the prompt: the first task (however the client
    wrote it back) and the answer the recording upstream gave it."""
    texts = [holder[key] for item in before for holder, key in _text_slots(item)]
    first = next(task for task in FIRST_TASKS if any(task in text for text in texts))
    return ({"role": "user", "content": first}, {"role": "assistant", "content": ANSWER})


def wrappers() -> list[Wrapper]:
    """Every recorded body's first call, and its tool round trip where it recorded one."""
    out = []
    for fixture in sorted(CORPUS.glob("*.json")):
        if fixture.stem in SIDE_REQUESTS:
            continue
        first, whole = wrapper(fixture, loop=False), wrapper(fixture, loop=True)
        if first is None or whole is None:
            raise SystemExit(f"{fixture.name}: no recorded task found to replace; add its words to FIRST_TASKS")
        out.append(first)
        if whole.template != first.template:
            out.append(whole)
    return out


def boundaries(scorer: ComplexityScorer) -> list[float]:
    """The shipped config's tier boundaries, `calibrated` read from the scorer's weights."""
    tiers = load_config(ROOT / "config.yaml").config.routing.tiers
    return [float(scorer.threshold if t.below == "calibrated" else t.below) for t in tiers[:-1]]  # type: ignore[arg-type]


def sample(directory: Path | None, per_set: int | None, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _, records in sorted(routing_sets(directory).items()):
        out += records if per_set is None or len(records) <= per_set else rng.sample(records, per_set)
    return out


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    within: float
    same_tier: float
    apgr_delta: float
    worst: float

    def misses(self) -> bool:
        return self.within < WITHIN_SHARE or self.same_tier < SAME_TIER or abs(self.apgr_delta) > APGR_DELTA

    def cells(self) -> str:
        return f"{self.within:7.1%} {self.same_tier:7.1%} {self.apgr_delta:+8.4f} {self.worst:6.3f}"


def compare(name: str, bare: list[float], wrapped: list[float], records: list[dict[str, Any]],
            tier: Callable[[float], int]) -> Row:
    local = [r["local"] for r in records]
    hosted = [r["hosted"] for r in records]
    gaps = [abs(w - b) for w, b in zip(wrapped, bare)]
    delta = (apgr(quality_curve(wrapped, local, hosted)) or 0.0) - (apgr(quality_curve(bare, local, hosted)) or 0.0)
    return Row(name, sum(g <= WITHIN for g in gaps) / len(gaps),
               sum(tier(w) == tier(b) for w, b in zip(wrapped, bare)) / len(gaps), delta, max(gaps))


@dataclass(slots=True)
class Clocks:
    """CPU microseconds of this thread (preemption by other processes left out): reading the task,
    deciding with it (read + score of what it gives) and deciding as before (the whole conversation)."""

    read: list[float]
    new: list[float]
    old: list[float]

    def line(self) -> str:
        def stats(us: list[float]) -> str:
            us = sorted(us)
            return f"median {statistics.median(us):.1f} us, p99 {us[int(0.99 * len(us))]:.1f} us"

        return (f"read_task: {stats(self.read)}; decision with it (read + score): {stats(self.new)}; "
                f"scoring the whole conversation: {stats(self.old)} ({len(self.read)} requests, CPU time of "
                "this thread on this machine)")


def measure(wrap: Wrapper, records: list[dict[str, Any]], scorer: ComplexityScorer,
            tier: Callable[[float], int], clocks: Clocks, bare_of: dict[str, float]) -> tuple[Row, Row, int]:
    """(the row with the task read, the row without, prompts read as harness only)."""
    dialect = DIALECTS[wrap.path]
    clock = time.thread_time_ns
    bare, read, whole, harness_only = [], [], [], 0
    for record in records:
        prompt = record["prompt"]
        call = dialect.parse(wrap.body(prompt))
        t0 = clock()
        task = read_task(call.messages, call.extra.get("tools"))
        t1 = clock()
        read.append(scorer.score(task.messages).value)
        t2 = clock()
        whole.append(scorer.score(call.messages).value)
        t3 = clock()
        clocks.read.append((t1 - t0) / 1000)
        clocks.new.append((t2 - t0) / 1000)
        clocks.old.append((t3 - t2) / 1000)
        harness_only += task.harness_only
        if wrap.history:
            bare.append(scorer.score(wrap.bare(prompt)).value)
        else:
            bare.append(bare_of[prompt] if prompt in bare_of else bare_of.setdefault(prompt, scorer.score_text(prompt)))
    return compare(wrap.name, bare, read, records, tier), compare(wrap.name, bare, whole, records, tier), harness_only


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--per-set", type=int, default=250, help="prompts sampled from each set (fixed seed)")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--all", action="store_true", help="every prompt of every set (slow)")
    args = parser.parse_args()
    records = sample(args.data, None if args.all else args.per_set, args.seed)
    scorer = ComplexityScorer.load()
    bounds = boundaries(scorer)

    def tier(score: float) -> int:
        return sum(score >= b for b in bounds)

    bodies = wrappers()
    print(f"{len(records)} prompts ({'all' if args.all else f'up to {args.per_set} per set, seed {args.seed}'}), "
          f"{len(bodies)} recorded bodies, tier boundaries {bounds}")
    print(f"targets with the task read: within {WITHIN} of bare >= {WITHIN_SHARE:.0%}, same tier >= {SAME_TIER:.0%}, "
          f"|APGR wrapped - bare| <= {APGR_DELTA}\n")
    head = f"{'':7s} {'same':>7s} {'APGR':>8s} {'worst':>6s}"
    print(f"{'body':48s} {'with the task read':31s}   {'without (the whole conversation)':31s}")
    print(f"{'':48s} {'within':>7s}{head[7:]}   {'within':>7s}{head[7:]}")
    clocks = Clocks([], [], [])
    bare_of: dict[str, float] = {}
    missed, only = [], 0
    for wrap in bodies:
        read, whole, harness_only = measure(wrap, records, scorer, tier, clocks, bare_of)
        only += harness_only
        flag = "  MISSED" if read.misses() else ""
        print(f"{wrap.name:48s} {read.cells()}   {whole.cells()}{flag}")
        if read.misses():
            missed.append(wrap.name)
    print(f"\n{clocks.line()}\n{only} wrapped prompts read as harness only")
    if missed:
        print(f"MISSED with the task read: {', '.join(missed)}")
        return 1
    print("every target met with the task read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
