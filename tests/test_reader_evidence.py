"""Issue 54 through `route serve`: the task as the user wrote it. A user's own long spec or
"Problem:" with rules after it is routed on all of it; eight requests sharing the user's own
instruction prefix are all routed as the first; the same body is scored alike after any other
client's traffic and after any number of explains; a new run of the same prompt starts its own
session. Each case is checked against what the shipped scorer gives the text as typed, not
against a tier written into the test."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.harness import wrapper
from policies.complexity import ComplexityScorer
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.user_texts import PROBLEM, SPEC

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parent / "data" / "clients"
SCORER = ComplexityScorer.load()
BOUNDS = (0.45, 0.6)
TIERS = ("local", "fast", "frontier")
def _typed_tier(text: str) -> str:
    """The tier the text scores as typed, by the shipped scorer and the config's boundaries."""
    score = SCORER.score_text(text)
    return TIERS[sum(score >= b for b in BOUNDS)]


@pytest.fixture(scope="module")
def serve(sim):
    backends = {n: {"kind": "openai", "model": f"m-{n}", "base_url": sim.base_url, "max_retries": 0} for n in TIERS}
    config = {"backends": backends, "aliases": {"*": "auto"}, "log": {"enabled": False},
              "routing": {"scorer": {"kind": "learned"},
                          "tiers": [{"name": "local", "below": BOUNDS[0], "backends": ["local"]},
                                    {"name": "fast", "below": BOUNDS[1], "backends": ["fast"]},
                                    {"name": "frontier", "backends": ["frontier"]}]}}
    with RouteServer(Router(load_config(config), source="server")) as srv, \
            httpx.Client(base_url=srv.url, timeout=60) as http:
        yield http


def _chat(http: httpx.Client, messages: list[dict[str, Any]], **fields: Any) -> httpx.Response:
    answer = http.post("/v1/chat/completions", json={"model": "auto", "messages": messages, **fields})
    assert answer.status_code == 200, answer.text
    return answer


def _recorded(http: httpx.Client, fixture: str, task: str) -> httpx.Response:
    """The recorded client's first call, its task replaced by `task`."""
    record = json.loads((CORPUS / f"{fixture}.json").read_text())
    template = wrapper(CORPUS / f"{fixture}.json", loop=False)
    assert template is not None
    answer = http.post(record["path"], content=template.body(task), headers={"content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    return answer


@pytest.mark.parametrize("text", [SPEC, PROBLEM], ids=["spec", "problem"])
def test_a_users_own_spec_is_routed_on_all_of_it_bare_and_inside_an_agent(serve, text):
    typed = _typed_tier(text)
    # the first paragraph alone scores lower: the cut this guards against would show
    assert _typed_tier(text.split("\n\n")[0]) != typed
    bare = _chat(serve, [{"role": "user", "content": text}])
    assert bare.headers["x-route-tier"] == typed
    assert float(bare.headers["x-route-score"]) == pytest.approx(SCORER.score_text(text), abs=1e-3)
    for fixture in ("claude-code-sonnet-thinking-tool-round-trip", "codex-responses-tool-round-trip",
                    "openhands-chat-tool-round-trip"):
        assert _recorded(serve, fixture, text).headers["x-route-tier"] == typed, fixture


def test_eight_requests_sharing_the_users_instruction_are_all_routed_as_the_first(serve):
    prefix = ("Give a rigorous, step-by-step mathematical proof, then an optimized Python implementation with unit "
              "tests, for the following: ")
    questions = ["the sum of the first n odd numbers is n squared", "there are infinitely many primes",
                 "every tree with n nodes has n - 1 edges", "sqrt(2) is irrational",
                 "a graph is bipartite iff it has no odd cycle", "the harmonic series diverges",
                 "gcd(a, b) divides a - b", "2^n > n for every n >= 1"]
    tiers = [_chat(serve, [{"role": "user", "content": prefix + q}]).headers["x-route-tier"] for q in questions]
    assert tiers == [_typed_tier(prefix + q) for q in questions]
    assert len(set(tiers)) == 1, tiers


def test_the_same_body_scores_alike_after_other_clients_traffic_and_after_explains(sim, serve):
    probes = ["hi", "Prove that there are infinitely many primes of the form 4k + 3.",
              "Rename the variable cnt to count in utils.py."]
    system = {"role": "system", "content": "You are a ticket bot."}

    def scores() -> list[str]:
        ticket = [_chat(serve, [system, {"role": "user", "content": f"### Ticket\n{p}\n### Reply in JSON."}])
                  for p in probes]
        bare = [_chat(serve, [{"role": "user", "content": text}])  # a person's own, in the other traffic's shape too
                for p in probes for text in (p, f"### Ticket\n{p}\n### Reply in JSON.")]
        return [answer.headers["x-route-score"] for answer in ticket + bare]

    scores()  # the ticket bot's own traffic teaches its own template: that is learning, and it settles
    before = scores()
    # other clients: another key's app, the same system prompt behind other tools, bare prompts
    other_tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    for n in range(6):
        _chat(serve, [system, {"role": "user", "content": f"### Ticket\nOther task {n} about invoices.\n### Reply in JSON."}],
              tools=other_tools)
        _chat(serve, [{"role": "user", "content": f"### Ticket\nBare task {n}.\n### Reply in JSON."}])
    assert scores() == before
    config = {"backends": {"m": {"kind": "openai", "model": "m", "base_url": sim.base_url}}, "log": {"enabled": False},
              "routing": {"scorer": {"kind": "learned"}, "tiers": [{"name": "m", "backends": ["m"]}]}}
    with Router(load_config(config)) as router:
        body = [system, {"role": "user", "content": "### Ticket\nProve it.\n### Reply in JSON."}]
        first = router.explain(body).score
        for _ in range(5):
            for p in probes:
                router.explain([system, {"role": "user", "content": f"### Ticket\n{p}\n### Reply in JSON."}])
        again = router.explain(body).score
        assert first is not None and again is not None and again.value == first.value


def test_a_new_run_of_the_same_prompt_starts_its_own_session(serve):
    record = json.loads((CORPUS / "openhands-chat-tool-round-trip.json").read_text())
    body = copy.deepcopy(record["body"])
    first_turn = [m for m in body["messages"] if m["role"] in ("system", "user")][:2]
    body.update(model="auto", stream=False, messages=first_turn)
    body.pop("stream_options", None)
    body.pop("prompt_cache_key", None)  # a derived session: route keys it by the task
    failing = "Command failed\n[The command completed with exit code 1.]"
    run = first_turn
    first = serve.post("/v1/chat/completions", json=body)
    assert first.status_code == 200, first.text
    start, session = first.headers["x-route-tier"], first.headers["x-route-session"]
    for i in range(2):  # two failed steps: the first run escalates
        call = {"id": f"c{i}", "type": "function", "function": {"name": "terminal", "arguments": f'{{"n": {i}}}'}}
        run = [*run, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": f"c{i}", "content": failing}]
        escalated = serve.post("/v1/chat/completions", json={**body, "messages": run})
    assert escalated.headers["x-route-session"] == session
    assert TIERS.index(escalated.headers["x-route-tier"]) > TIERS.index(start)
    again = serve.post("/v1/chat/completions", json=body)  # the same prompt, run again from the start
    assert again.headers["x-route-session"] == session and again.headers["x-route-tier"] == start
