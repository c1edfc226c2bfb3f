"""Sessions against per-call routing, on generated agent sessions, through the real path.

    python benchmarks/sessions.py [--coding 40] [--chats 40] [--seed 7]

Generated with a fixed seed: coding tasks (a system prompt and tools an agent resends every
call, an easy, a medium or a hard first request, then 5-60 tool round trips returning code,
half with the short reminder Claude Code adds), and chats (a question, then 2-6 short
follow-ups). Every call
goes through `Router.acomplete` to the simulated server, three tiers of simulated backends that
cache prompts like a provider (a prefix the same model saw within five minutes is billed as
cached, at a tenth of the input price). The same sessions run twice, in one run: routed call by
call (no session), and as sessions.

Printed per mode: backend moves per session (and how many went down a tier), input cost,
the share of input tokens served from cache, and the share of calls answered below the
session's own tier (the highest tier any of its calls was routed to). Targets with healthy
backends: moves only upward and at most 0.1 per session; the coding sessions' input cost at
most 0.35x of per-call routing; no downward move after a follow-up. Last, the session table's
memory after 100,000 distinct sessions against 10,000 (it is bounded: flat).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tracemalloc
from dataclasses import dataclass, field

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backends.simulator import SimServer
from router import Router
from router.config_loader import load_config
from router.sessions import SessionState, SessionTable

TIERS = ("local", "fast", "frontier")
PRICES = {"local": {"input": 0.0, "output": 0.0},
          "fast": {"input": 0.25, "output": 0.75, "cache_read": 0.025, "cache_write": 0.25},
          "frontier": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.0}}
SYSTEM = ("You are a coding agent working in a git repository. Use the tools to read and edit files, run "
          "commands and tests. Keep changes small and explain them briefly. ") * 25
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
         for name in ("read_file", "edit_file", "run", "search")]
EASY = ["Rename the variable cnt to count in utils.py.", "Add a docstring to the parse function.",
        "Fix the typo in the README title.", "Make the log message in main.py lowercase.",
        "Remove the unused import in cli.py."]
MEDIUM = ["Add pagination to the /users endpoint, with a cursor, and update the tests that list users.",
          "The CSV export drops rows whose description contains a newline; fix the quoting and add a regression test.",
          "Refactor the retry logic in http_client.py into a decorator with exponential backoff and jitter, keeping "
          "behaviour the same.",
          "Write a migration that splits the name column into first_name and last_name, and backfill existing rows.",
          "Our CI job takes 20 minutes; cache the pip downloads and run the unit tests in parallel."]
HARD = ["Find why the integration test for the payment webhook fails intermittently under concurrent "
        "retries, prove the race in the idempotency check, and redesign the locking so that no charge is "
        "ever applied twice, with a migration plan for existing rows and tests that reproduce the race.",
        "Derive the closed form of the expected number of comparisons of randomized quicksort with a "
        "median-of-three pivot, prove it by induction, and implement an experiment that checks it.",
        "Prove that the lock-free queue in queue.c is linearizable or give a counterexample schedule; "
        "then fix the ABA problem in its compare-and-swap loop and explain the memory ordering needed."]
FOLLOW_UPS = ["ok, continue", "thanks", "and for k=3?", "go on", "why?", "shorter please"]
REMINDER = "<system-reminder>Keep the todo list up to date.</system-reminder>"
CODE = """def handle(request):
    user = db.get_user(request.user_id)
    if not user.is_active:
        raise PermissionError("inactive user")
    total = 0
    for item in request.items:
        total += item.price * item.quantity
    return Response(total=total, currency=user.currency)
"""


def _task(rng: random.Random, hard_share: float) -> str:
    roll = rng.random()
    return rng.choice(HARD if roll < hard_share else MEDIUM if roll < 0.6 else EASY)


@dataclass
class Tally:
    moves: int = 0
    down_moves: int = 0
    follow_up_down: int = 0
    input_cost: float = 0.0
    coding_input_cost: float = 0.0
    input_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    below: int = 0
    sessions: int = 0
    rank: dict[str, int] = field(default_factory=dict)


def _config(sim) -> dict:
    backends = {name: {"kind": "openai", "model": f"m-{name}", "base_url": sim.base_url, "max_retries": 0,
                       "price": PRICES[name]} for name in TIERS}
    return {"backends": backends, "log": {"enabled": False},
            "routing": {"scorer": {"kind": "learned"},
                        "tiers": [{"name": "local", "below": 0.45, "backends": ["local"]},
                                  {"name": "fast", "below": "calibrated", "backends": ["fast"]},
                                  {"name": "frontier", "backends": ["frontier"]}]}}


def _coding(rng: random.Random) -> list[list[dict]]:
    """The message lists of each call of one coding task."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _task(rng, 0.25)}]
    calls = [list(messages)]
    for i in range(rng.randint(5, 60)):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"call_{i}", "content": CODE * rng.randint(1, 6)}]
        if rng.random() < 0.5:
            messages.append({"role": "user", "content": REMINDER})
        calls.append(list(messages))
    return calls


def _chat(rng: random.Random) -> list[list[dict]]:
    messages = [{"role": "user", "content": _task(rng, 0.35)}]
    calls = [list(messages)]
    for _ in range(rng.randint(2, 6)):
        messages += [{"role": "assistant", "content": "Here is the answer. " * 20},
                     {"role": "user", "content": rng.choice(FOLLOW_UPS)}]
        calls.append(list(messages))
    return calls


async def _run(router: Router, workload: list[tuple[str, list[list[dict]]]], sessions: bool) -> Tally:
    tally = Tally(rank={name: i for i, name in enumerate(TIERS)})
    for index, (kind, calls) in enumerate(workload):
        tally.sessions += 1
        answered: list[tuple[str, str | None]] = []  # (backend, tier routed to)
        for number, messages in enumerate(calls):
            key = f"{kind}-{index}" if sessions else None
            result = await router.acomplete(messages, max_tokens=16, session=key, tools=TOOLS if kind == "coding" else None)
            usage = result.completion.usage
            price = PRICES[result.backend]
            cost = (usage.uncached_input_tokens * price["input"] + usage.cache_read_tokens * price.get("cache_read", 0)) / 1e6
            tally.input_cost += cost
            tally.coding_input_cost += cost if kind == "coding" else 0.0
            tally.input_tokens += usage.input_tokens
            tally.cached_tokens += usage.cache_read_tokens
            tally.calls += 1
            if answered and answered[-1][0] != result.backend:
                tally.moves += 1
                if tally.rank[result.backend] < tally.rank[answered[-1][0]]:
                    tally.down_moves += 1
                    tally.follow_up_down += kind == "chat" and number > 0
            answered.append((result.backend, result.decision.tier))
        top = max(tally.rank[tier] for _, tier in answered if tier is not None)
        tally.below += sum(tally.rank[backend] < top for backend, _ in answered)
    return tally


def _table_memory(n: int) -> float:
    """KiB a session table holds after `n` distinct sessions went through it."""
    tracemalloc.start()
    table = SessionTable(max_entries=10_000)
    for i in range(n):
        table.put(f"session-{i}", SessionState(tier=i % 3, backend="fast", calls=3, cached_tokens=4000))
    size = tracemalloc.get_traced_memory()[0] / 1024
    tracemalloc.stop()
    return size


async def main(coding: int, chats: int, seed: int) -> None:
    rng = random.Random(seed)
    workload = [("coding", _coding(rng)) for _ in range(coding)] + [("chat", _chat(rng)) for _ in range(chats)]
    profiles = {f"m-{name}": {"ttft_s": 0.0, "tokens_per_s": None, "answer_tokens": 8, "prompt_cache_ttl_s": 300}
                for name in TIERS}
    results = {}
    for mode in ("per-call", "sessions"):
        with SimServer(profiles=profiles) as sim:  # a fresh provider cache for each mode
            async with Router(load_config(_config(sim))) as router:
                results[mode] = await _run(router, workload, sessions=mode == "sessions")
    calls = results["sessions"].calls
    print(f"{coding} coding tasks and {chats} chats, {calls} calls per mode (seed {seed}); simulated backends "
          "that cache prompts for 5 minutes")
    print(f"{'':<10} {'moves/session':>14} {'down':>5} {'input $':>10} {'coding input $':>15} {'cache hits':>11} "
          f"{'below tier':>11}")
    for mode, t in results.items():
        print(f"{mode:<10} {t.moves / t.sessions:>14.2f} {t.down_moves:>5} {t.input_cost:>10.4f} "
              f"{t.coding_input_cost:>15.4f} {t.cached_tokens / max(1, t.input_tokens):>11.1%} "
              f"{t.below / max(1, t.calls):>11.1%}")
    per_call, kept = results["per-call"], results["sessions"]
    ratio = kept.coding_input_cost / per_call.coding_input_cost if per_call.coding_input_cost else float("nan")
    print(f"sessions vs per-call: coding input cost x{ratio:.2f} (target <= 0.35); moves per session "
          f"{kept.moves / kept.sessions:.2f} (target <= 0.1, all up: {kept.down_moves == 0}); downward moves after a "
          f"follow-up {kept.follow_up_down} (target 0)")
    small, large = statistics.mean(_table_memory(10_000) for _ in range(2)), _table_memory(100_000)
    print(f"session table: {small:.0f} KiB after 10,000 sessions, {large:.0f} KiB after 100,000 (bounded at 10,000 "
          f"entries: x{large / small:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coding", type=int, default=40)
    parser.add_argument("--chats", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.coding, args.chats, args.seed))
