"""The reader judged on what no rule was written from (issue 54), for benchmarks/harness.py --held-out.

Three kinds of data, none of which the reader's rules were written from:
- **recordings made after the rules were frozen**: the corpus bodies whose fixture names the
  commit they came after (`after_rules`: agent CLIs and frameworks -- dspy, LlamaIndex, LangChain's
  stock ReAct prompt, CrewAI, smolagents, AutoGen, Haystack... -- driven for real, their own
  templates around the task). Each client is read over a stream of tasks as a router reads its
  traffic (benchmarks/harness_readers.py `Traffic`): every prompt of the sample in turn, through
  each of its bodies, what its answered requests taught applied to the next;
- **users' own prompts** of the kinds coding users type (tests/data/user_prompts: specs with
  headings and lists, issues with tracebacks, pasted files and logs, a label line over code, a
  fixed instruction over a batch; written by people, public sources credited there), and real
  coding-agent issues (../shared/data/routing/swebench_pro.jsonl, where present): each as a bare
  prompt, as a turn after the model's answer (a terminal chat), and pasted into every recorded
  agent's first call;
- the same through the reader of an earlier checkout (`--base DIR`): the figure before.

Per row: the share of prompts on the tier the prompt scores as typed (target >= 95%) and the
mean |shift| of the score (<= 0.03); for recorded clients also the share as first requests
(no traffic learned: no target). The figure is the tier of the text the router scores, by the
shipped scorer and the shipped config's boundaries; nothing here reads a label.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.types import Message
from benchmarks.harness import CORPUS, DIALECTS, SIDE_REQUESTS, Wrapper, wrapper
from benchmarks.harness_readers import Before, Traffic
from benchmarks.routing_data import DEFAULT_DIR
from policies.complexity import ComplexityScorer
from policies.task import read_task, scored_text

__all__ = ["AFTER_RULES", "held_out", "held_out_clients", "user_prompts"]

AFTER_RULES = "after_rules"  # a fixture's field: the commit whose reader rules it was recorded after
USER_PROMPTS = CORPUS.parent / "user_prompts" / "user_prompts.jsonl"
SWEBENCH = DEFAULT_DIR / "swebench_pro.jsonl"
SWEBENCH_SAMPLE = 60
SAME_TIER, SHIFT = 0.95, 0.03
# The turns before a user's prompt in a terminal chat: the prompt follows the model's answer.
CHAT = ({"role": "user", "content": "Can you help me with something in my project?"},
        {"role": "assistant", "content": "Of course. What do you need?"})


def held_out_clients() -> dict[str, list[Wrapper]]:
    """Client -> its bodies recorded after the rules (first calls, and tool round trips)."""
    clients: dict[str, list[Wrapper]] = {}
    for fixture in sorted(CORPUS.glob("*.json")):
        record = json.loads(fixture.read_text())
        if not record.get(AFTER_RULES) or fixture.stem in SIDE_REQUESTS:
            continue
        for loop in (False, True):
            wrap = wrapper(fixture, loop)
            if wrap is not None and all(w.template != wrap.template for w in clients.get(wrap.client, [])):
                clients.setdefault(wrap.client, []).append(wrap)
    return clients


def user_prompts(swebench: int = SWEBENCH_SAMPLE, seed: int = 54) -> list[dict[str, Any]]:
    """The users' own prompts, then a fixed-seed sample of the real coding-agent issues."""
    rows = [json.loads(line) for line in USER_PROMPTS.read_text().splitlines() if line.strip()]
    if SWEBENCH.is_file():
        issues = [json.loads(line) for line in SWEBENCH.read_text().splitlines() if line.strip()]
        rows += [{"id": r["id"], "kind": "swebench_pro issue", "prompt": r["prompt"]}
                 for r in random.Random(seed).sample(issues, min(swebench, len(issues)))]
    return rows


@dataclass(frozen=True, slots=True)
class Figure:
    same_tier: float
    shift: float
    n: int

    def misses(self) -> bool:
        return self.same_tier < SAME_TIER or self.shift > SHIFT

    def cells(self) -> str:
        return f"{self.same_tier:8.1%} {self.shift:7.4f}"


class Judge:
    """Scores a read text against the prompt as typed, by tier and by score."""

    def __init__(self, scorer: ComplexityScorer, tier: Callable[[float], int]):
        self.scorer, self.tier = scorer, tier
        self._typed: dict[str, float] = {}

    def typed(self, prompt: str) -> float:
        if prompt not in self._typed:
            self._typed[prompt] = self.scorer.score_text(prompt)
        return self._typed[prompt]

    def figure(self, pairs: list[tuple[str, str]]) -> Figure:
        """(prompt, the text read) pairs -> the share on the prompt's tier and the mean |shift|."""
        typed = [self.typed(p) for p, _ in pairs]
        read = [self.scorer.score_text(t) for _, t in pairs]
        return Figure(statistics.fmean(self.tier(a) == self.tier(b) for a, b in zip(typed, read)),
                      statistics.fmean(abs(a - b) for a, b in zip(typed, read)), len(pairs))


def _calls(wraps: list[Wrapper], prompts: list[str]) -> Iterator[tuple[str, list[Message], Any]]:
    """Each prompt in turn, through each body: (the prompt, the messages, the tools) as parsed."""
    for prompt in prompts:
        for wrap in wraps:
            call = DIALECTS[wrap.path].parse(wrap.body(prompt))
            yield prompt, call.messages, call.extra.get("tools")


def _row(name: str, figures: list[Figure | None], missed: list[str], target: bool = True) -> None:
    """One line; the first figure (this reader, as the router reads the traffic) is held to the
    targets unless `target` is False (said on the line)."""
    cells = " ".join(f.cells() if f is not None else f"{'-':>8} {'-':>7}" for f in figures)
    judged = figures[0]
    flag = "  MISSED" if target and judged is not None and judged.misses() else "" if target else "  (no target)"
    n = judged.n if judged is not None else 0
    print(f"{name:44s} {n:6d} {cells}{flag}")
    if flag.strip() == "MISSED":
        missed.append(name)


def _clients_table(judge: Judge, prompts: list[str], before: Before | None, missed: list[str]) -> None:
    clients = held_out_clients()
    print(f"\nrecorded after the rules ({len(clients)} clients, {sum(map(len, clients.values()))} bodies); "
          "each over a stream of tasks, learning its traffic as the router does")
    print(f"{'client':44s} {'calls':>6s} {'same tier':>8s} {'|shift|':>7s} {'first req':>8s} {'|shift|':>7s} "
          f"{'before':>8s} {'|shift|':>7s}")
    for client, wraps in sorted(clients.items()):
        traffic, now, first, old = Traffic(), [], [], []
        for prompt, messages, tools in _calls(wraps, prompts):
            now.append((prompt, traffic.read(messages, tools)))
            first.append((prompt, scored_text(read_task(messages, tools))))
            if before is not None:
                old.append((prompt, before.read(messages, tools, stream=client)))
        _row(client, [judge.figure(now), judge.figure(first), judge.figure(old) if old else None], missed)


def _agents() -> list[Wrapper]:
    """One first-call body of every recorded agent and library (where a user pastes a prompt)."""
    seen: dict[str, Wrapper] = {}
    for fixture in sorted(CORPUS.glob("*.json")):
        if fixture.stem in SIDE_REQUESTS:
            continue
        wrap = wrapper(fixture, loop=False)
        if wrap is not None and wrap.client not in seen and not wrap.history:
            seen[wrap.client] = wrap
    return list(seen.values())


def _users_table(judge: Judge, before: Before | None, missed: list[str]) -> None:
    rows = user_prompts()
    kinds: dict[str, list[str]] = {}
    for row in rows:
        kinds.setdefault(row["kind"], []).append(row["prompt"])
    agents = _agents()
    print(f"\nusers' own prompts ({len(rows)}: {len(rows) - sum(r['kind'] == 'swebench_pro issue' for r in rows)} "
          f"from tests/data/user_prompts, the rest swebench_pro issues), bare, after an answer in a chat, "
          f"and pasted into {len(agents)} recorded agents' first calls")
    print(f"{'kind, where':44s} {'reads':>6s} {'same tier':>8s} {'|shift|':>7s} {'before':>8s} {'|shift|':>7s}")
    traffic = {wrap.name: Traffic() for wrap in agents}  # each agent's traffic is the team's many tasks
    for kind, prompts in sorted(kinds.items()):
        for where, build in (("bare", lambda p: ([{"role": "user", "content": p}], None, None)),
                             ("after an answer", lambda p: ([*CHAT, {"role": "user", "content": p}], None, None))):
            now = [(p, scored_text(read_task(*build(p)[:2]))) for p in prompts]
            old = [(p, before.read(*build(p)[:2])) for p in prompts] if before is not None else []
            _row(f"{kind}, {where}", [judge.figure(now), judge.figure(old) if old else None], missed)
        now, old = [], []
        for prompt in prompts:
            for wrap in agents:
                call = DIALECTS[wrap.path].parse(wrap.body(prompt))
                tools = call.extra.get("tools")
                now.append((prompt, traffic[wrap.name].read(call.messages, tools)))
                if before is not None:
                    old.append((prompt, before.read(call.messages, tools, stream=wrap.name)))
        # A fixed instruction over a batch sent through an agent (a system prompt, tools) is what a
        # client's template looks like to its traffic: learned after two tasks (README, "the task").
        _row(f"{kind}, in an agent", [judge.figure(now), judge.figure(old) if old else None], missed,
             target=kind != "prefix_batch")


def held_out(records: list[dict[str, Any]], scorer: ComplexityScorer, tier: Callable[[float], int],
             base: Path | None) -> int:
    """The held-out tables; 1 when a row misses its targets."""
    judge = Judge(scorer, tier)
    before = Before(base) if base is not None else None
    print(f"targets per row: on the typed prompt's tier >= {SAME_TIER:.0%}, mean |shift| <= {SHIFT}"
          + (f"; 'before': the reader of {base}" if base is not None else ""))
    missed: list[str] = []
    try:
        _clients_table(judge, [r["prompt"] for r in records], before, missed)
        _users_table(judge, before, missed)
    finally:
        if before is not None:
            before.close()
    if missed:
        print(f"\nMISSED: {', '.join(missed)}")
        return 1
    print("\nevery row met its targets on data recorded or written after the rules")
    return 0
