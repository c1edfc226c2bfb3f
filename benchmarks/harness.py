"""Harness invariance: a prompt scores the same bare and wrapped in any client's harness.

    .venv/bin/python benchmarks/harness.py [DIR] [--per-set 250] [--seed 37] [--all]
    .venv/bin/python benchmarks/harness.py --leave-one-client-out [DIR] [--per-set 100]

Each prompt of the routing sets in DIR (default ../shared/data/routing; a fixed-seed sample of
`--per-set` prompts of each set, `--all` for every prompt) is put in the place of the user's
words in every request body recorded from a real client (tests/data/clients), parsed by the
server's own dialect of that body's protocol into the router's messages, and scored by the
shipped scorer as the router scores a call (policies/task.py's `scored_text`: the user's words
of the latest turn, the harness set aside), beside the bare prompt read the same way.
A body is taken as the client's first call of the task (what follows the user's turn in a
recorded tool round trip is dropped, the client's system messages kept); `+loop` rows take the
recorded round trip whole, tool call and result included. Claude Code's session-title request
is left out: it is a side request about the task, not a turn of it.

Default: per body, the share of prompts scoring within 0.02 of the bare prompt (target >= 95%),
the share on the same tier under the shipped config's boundaries (>= 98%), and the APGR of the
wrapped scores less that of the bare ones (within 0.01); the same three for the whole
conversation scored as it is sent show what the harness does unread.

`--leave-one-client-out`: the rules judged on data they were not written from. Each client is
read with its own entry of policies/shapes.py removed (general rules and the other clients'
data only); the four kinds of wrapper of issue 46 (benchmarks/harness_cases.py) are read with
no client's data at all, and a client's own short template (no general rule reads it) is read
on each task as it comes, by its first request's rules and by the template policies/template.py
learns from the tasks before it (the first row is shown, the second is held to the target). Per row: the share on the bare prompt's tier (target >= 95%) and the
mean |shift| of the score (<= 0.03). A last row reads the bare prompts themselves and compares
them with the prompts as typed: what the general rules take from a user's own words.
Exits 1 when a target is missed.
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
from benchmarks.harness_cases import cases, short_template
from benchmarks.routing_data import routing_sets
from policies.complexity import ComplexityScorer
from policies.routing_eval import apgr, quality_curve
from policies.shapes import KNOWN, Shapes
from policies.task import read_task, scored_text
from policies.template import Learned
from router.config_loader import load_config
from router.server.protocols.chat import ChatDialect
from router.server.protocols.gemini import GeminiDialect
from router.server.protocols.messages import MessagesDialect
from router.server.protocols.responses import ResponsesDialect

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "clients"
GEMINI = "/v1beta/models/"


class _Dialects(dict[str, Any]):
    """The server's dialect of each recorded path; Gemini's paths name the model and method."""

    def __missing__(self, path: str) -> Any:
        if not path.startswith(GEMINI):
            raise KeyError(path)
        model, method = path[len(GEMINI):].split(":", 1)
        return GeminiDialect(model, method, False)


DIALECTS = _Dialects({"/v1/chat/completions": ChatDialect(), "/v1/messages": MessagesDialect(),
                      "/v1/responses": ResponsesDialect()})
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
LOO_SAME_TIER, LOO_SHIFT = 0.95, 0.03  # --leave-one-client-out: per client and per wrapper kind


@dataclass(frozen=True, slots=True)
class Wrapper:
    """One recorded body with the user's words replaced by PLACEHOLDER, ready to fill in."""

    name: str
    path: str
    template: bytes
    history: tuple[Message, ...]  # the bare conversation before the prompt (second turns)
    client: str = ""  # as policies/shapes.py names it: the recording's client less its version

    def body(self, prompt: str) -> bytes:
        return self.template.replace(PLACEHOLDER.encode(), orjson.dumps(prompt)[1:-1])

    def bare(self, prompt: str) -> list[Message]:
        return [*self.history, {"role": "user", "content": prompt}]


def _items(body: dict[str, Any], path: str) -> list[dict[str, Any]]:
    if path.startswith(GEMINI):
        return body["contents"]
    return body["input"] if path == "/v1/responses" else body["messages"]


def _text_slots(item: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(holder, key) of each text of a user item, in order."""
    if item.get("role") != "user":
        return []
    content = item.get("content", item.get("parts"))
    if isinstance(content, str):
        return [(item, "content")]
    return [(part, "text") for part in content or () if isinstance(part, dict) and isinstance(part.get("text"), str)]


def _typed(text: str, tasks: tuple[str, ...]) -> str | None:
    """The task `text` holds as the user typed it, wherever the client put it (whole, quoted,
    before its own text, inside a template)."""
    return next((task for task in tasks if task in text), None)


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
    client = str(record.get("client", "")).split(" ")[0]
    return Wrapper(fixture.stem + (" +loop" if loop else ""), path, orjson.dumps(body), history, client)


def _bare_history(before: list[dict[str, Any]]) -> tuple[Message, ...]:
    """A second turn's bare conversation before the prompt: the first task (however the client
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
    mean_shift: float = 0.0

    def misses(self) -> bool:
        return self.within < WITHIN_SHARE or self.same_tier < SAME_TIER or abs(self.apgr_delta) > APGR_DELTA

    def misses_loo(self) -> bool:
        return self.same_tier < LOO_SAME_TIER or self.mean_shift > LOO_SHIFT

    def cells(self) -> str:
        return f"{self.within:7.1%} {self.same_tier:7.1%} {self.apgr_delta:+8.4f} {self.worst:6.3f}"


def compare(name: str, bare: list[float], wrapped: list[float], records: list[dict[str, Any]],
            tier: Callable[[float], int]) -> Row:
    local = [r["local"] for r in records]
    hosted = [r["hosted"] for r in records]
    gaps = [abs(w - b) for w, b in zip(wrapped, bare)]
    delta = (apgr(quality_curve(wrapped, local, hosted)) or 0.0) - (apgr(quality_curve(bare, local, hosted)) or 0.0)
    return Row(name, sum(g <= WITHIN for g in gaps) / len(gaps),
               sum(tier(w) == tier(b) for w, b in zip(wrapped, bare)) / len(gaps), delta, max(gaps),
               statistics.fmean(gaps))


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


class Reader:
    """Scores as the router does: the task read (with `shapes`), its scored text scored."""

    def __init__(self, scorer: ComplexityScorer):
        self.scorer = scorer
        self.bare_of: dict[str, float] = {}

    def score(self, messages: list[Message], tools: Any = None, shapes: Shapes = KNOWN,
              learned: Learned | None = None) -> float:
        return self.scorer.score_text(scored_text(read_task(messages, tools, shapes, learned)))

    def bare(self, prompt: str) -> float:
        """The bare prompt as the router reads it (the same rules, so a shape a prompt itself has
        is read alike on both sides; the last row of --leave-one-client-out shows what it costs)."""
        if prompt not in self.bare_of:
            self.bare_of[prompt] = self.score([{"role": "user", "content": prompt}])
        return self.bare_of[prompt]


def measure(wrap: Wrapper, records: list[dict[str, Any]], reader: Reader,
            tier: Callable[[float], int], clocks: Clocks) -> tuple[Row, Row, int]:
    """(the row with the task read, the row without, prompts read as harness only)."""
    dialect = DIALECTS[wrap.path]
    clock = time.thread_time_ns
    scorer = reader.scorer
    bare, read, whole, harness_only = [], [], [], 0
    for record in records:
        prompt = record["prompt"]
        call = dialect.parse(wrap.body(prompt))
        t0 = clock()
        task = read_task(call.messages, call.extra.get("tools"))
        t1 = clock()
        read.append(scorer.score_text(scored_text(task)))
        t2 = clock()
        whole.append(scorer.score(call.messages).value)
        t3 = clock()
        clocks.read.append((t1 - t0) / 1000)
        clocks.new.append((t2 - t0) / 1000)
        clocks.old.append((t3 - t2) / 1000)
        harness_only += task.harness_only
        bare.append(reader.bare(prompt))
    return compare(wrap.name, bare, read, records, tier), compare(wrap.name, bare, whole, records, tier), harness_only


def invariance(records: list[dict[str, Any]], reader: Reader, tier: Callable[[float], int]) -> int:
    """The default table: every recorded body, its task read and not."""
    bodies = wrappers()
    print(f"{len(bodies)} recorded bodies")
    print(f"targets with the task read: within {WITHIN} of bare >= {WITHIN_SHARE:.0%}, same tier >= {SAME_TIER:.0%}, "
          f"|APGR wrapped - bare| <= {APGR_DELTA}\n")
    head = f"{'':7s} {'same':>7s} {'APGR':>8s} {'worst':>6s}"
    print(f"{'body':48s} {'with the task read':31s}   {'without (the whole conversation)':31s}")
    print(f"{'':48s} {'within':>7s}{head[7:]}   {'within':>7s}{head[7:]}")
    clocks = Clocks([], [], [])
    missed, only = [], 0
    for wrap in bodies:
        read, whole, harness_only = measure(wrap, records, reader, tier, clocks)
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


def _loo_row(name: str, pairs: list[tuple[float, float]], records: list[dict[str, Any]],
             tier: Callable[[float], int]) -> Row:
    bare, wrapped = [b for b, _ in pairs], [w for _, w in pairs]
    return compare(name, bare, wrapped, records * (len(pairs) // len(records)), tier)


def leave_one_client_out(records: list[dict[str, Any]], reader: Reader, tier: Callable[[float], int]) -> int:
    """Every client read by rules written without it, over its traffic as a router reads it (its
    first request shown beside, no target); the wrapper kinds of issue 46 by no client's data."""
    from benchmarks.harness_readers import Traffic

    by_client: dict[str, list[Wrapper]] = {}
    for wrap in wrappers():
        by_client.setdefault(wrap.client, []).append(wrap)
    print(f"targets per row, over the client's traffic: on the bare prompt's tier >= {LOO_SAME_TIER:.0%}, mean |shift| "
          f"<= {LOO_SHIFT}; the first request alone is shown beside it\n")
    print(f"{'row':58s} {'bodies':>6s} {'same tier':>9s} {'mean|shift|':>11s} {'worst':>6s} {'APGR':>8s} {'first req':>9s}")
    missed = []

    def show(name: str, bodies: int, row: Row, first: Row, target: bool = True) -> None:
        flag = "  MISSED" if target and row.misses_loo() else "" if target else "  (no target)"
        print(f"{name:58s} {bodies:6d} {row.same_tier:9.1%} {row.mean_shift:11.4f} {row.worst:6.3f} "
              f"{row.apgr_delta:+8.4f} {first.same_tier:9.1%}{flag}")
        if flag.strip() == "MISSED":
            missed.append(name)

    def stream(build: Callable[[int, int], tuple[list[Message], Any]], shapes: Shapes,
               count: int) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """Prompt `n` in turn through body `k` of `count` (`build(n, k)`): (bare, read over the
        traffic) and (bare, read alone)."""
        traffic, learned, alone = Traffic(shapes), [], []
        for n, record in enumerate(records):
            for k in range(count):
                messages, tools = build(n, k)
                bare = reader.bare(record["prompt"])
                learned.append((bare, reader.scorer.score_text(traffic.read(messages, tools))))
                alone.append((bare, reader.score(messages, tools, shapes)))
        return learned, alone

    for client, wraps in sorted(by_client.items()):
        def body(n: int, k: int, wraps: list[Wrapper] = wraps) -> tuple[list[Message], Any]:
            call = DIALECTS[wraps[k].path].parse(wraps[k].body(records[n]["prompt"]))
            return call.messages, call.extra.get("tools")

        learned, alone = stream(body, KNOWN.without([client]), len(wraps))
        data = " (its data left out)" if client in KNOWN.clients else ""
        show(f"{client}{data}", len(wraps), _loo_row(client, learned, records, tier), _loo_row(client, alone, records, tier))
    print()
    nobody = Shapes({})
    others = records[1:] + records[:1]
    for case in cases():
        def built(n: int, k: int, case: Any = case) -> tuple[list[Message], Any]:
            return case.build(records[n]["prompt"], others[n]["prompt"]), None

        learned, alone = stream(built, nobody, 1)
        # What varies with the task (a pasted file, a tool's output) is never learned, and a label
        # no request declares is the user's: the rules' authors wrote these, nothing shows them.
        show(f"{case.kind}: {case.name}", 1, _loo_row(case.name, learned, records, tier),
             _loo_row(case.name, alone, records, tier), target=case.learnable)
    learned, alone = stream(lambda n, k: (short_template(records[n]["prompt"]), None), nobody, 1)
    show("a short template of its own", 1, _loo_row("learned", learned, records, tier),
         _loo_row("short template", alone, records, tier))
    typed = [reader.scorer.score_text(r["prompt"]) for r in records]
    read = [reader.bare(r["prompt"]) for r in records]
    row = compare("bare", typed, read, records, tier)
    print(f"\n{'bare prompts read, beside them as typed':58s} {'':6s} {row.same_tier:9.1%} {row.mean_shift:11.4f} "
          f"{row.worst:6.3f} {row.apgr_delta:+8.4f}  (what the rules take from a user's own words)")
    if missed:
        print(f"\nMISSED: {', '.join(missed)}")
        return 1
    print("\nevery client and every wrapper kind a client's traffic can show met its targets, read by rules written "
          "without it")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--per-set", type=int, default=None,
                        help="prompts sampled from each set (fixed seed; default 250, 100 with --leave-one-client-out)")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--all", action="store_true", help="every prompt of every set (slow)")
    parser.add_argument("--leave-one-client-out", action="store_true",
                        help="each client read by rules written without it, and the four wrapper kinds of issue 46")
    parser.add_argument("--held-out", action="store_true",
                        help="recordings made after the rules were frozen and users' own prompts (issue 54)")
    parser.add_argument("--base", type=Path, default=None,
                        help="with --held-out: an earlier checkout whose reader is run beside this one")
    args = parser.parse_args()
    per_set = args.per_set or (100 if args.leave_one_client_out else 20 if args.held_out else 250)
    records = sample(args.data, None if args.all else per_set, args.seed)
    scorer = ComplexityScorer.load()
    bounds = boundaries(scorer)

    def tier(score: float) -> int:
        return sum(score >= b for b in bounds)

    print(f"{len(records)} prompts ({'all' if args.all else f'up to {per_set} per set, seed {args.seed}'}), "
          f"tier boundaries {bounds}")
    if args.held_out:
        from benchmarks.harness_heldout import held_out

        return held_out(records, scorer, tier, args.base)
    reader = Reader(scorer)
    return (leave_one_client_out if args.leave_one_client_out else invariance)(records, reader, tier)


if __name__ == "__main__":
    raise SystemExit(main())
