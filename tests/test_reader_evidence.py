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


def _server(sim: Any, bounds: tuple[float, float]) -> Any:
    backends = {n: {"kind": "openai", "model": f"m-{n}", "base_url": sim.base_url, "max_retries": 0} for n in TIERS}
    config = {"backends": backends, "aliases": {"*": "auto"}, "log": {"enabled": False},
              "routing": {"scorer": {"kind": "learned"},
                          "tiers": [{"name": "local", "below": bounds[0], "backends": ["local"]},
                                    {"name": "fast", "below": bounds[1], "backends": ["fast"]},
                                    {"name": "frontier", "backends": ["frontier"]}]}}
    return RouteServer(Router(load_config(config), source="server"))


@pytest.fixture(scope="module")
def serve(sim):
    with _server(sim, BOUNDS) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        yield http


@pytest.fixture(scope="module")
def low_start(sim):
    """Every task starts on the lowest tier: what moves a session is its evidence alone."""
    with _server(sim, (0.9999, 0.99995)) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
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


def test_at_the_terminal_pasted_code_under_a_label_line_is_scored_with_its_question(sim, tmp_path):
    """Issue 54: in `route chat`, a turn that opens with "Here is my attempt:", a few lines of code,
    then a hard question, was read as the tool output of the session's task and not scored."""
    import subprocess
    import sys

    from tests.helpers import cli_config

    attempt = ("Here is my attempt:\nimport numpy as np\nxs = np.sort(a)\nys = np.cumsum(xs)\n"
               "total = (xs * (ys - xs)).sum()\nassert total == brute(a)\nprint(total)\nIt overflows for large "
               "inputs. Prove the identity it relies on, then derive an O(n log n) algorithm with exact integer "
               "arithmetic and prove it correct.")
    config = cli_config(tmp_path, sim.base_url).read_text().replace("scorer: {kind: length, threshold_chars: 100}",
                                                                    "scorer: {kind: learned}")
    (tmp_path / "learned.yaml").write_text(config)
    route = str(Path(sys.executable).parent / "route")
    typed = "Help me speed up a pair sum.\n!multi\n" + attempt + "\n!end\nexit\n"
    chat = subprocess.run([route, "chat", "-c", str(tmp_path / "learned.yaml")], input=typed, capture_output=True,
                          text=True, timeout=60)
    assert chat.returncode == 0, chat.stderr
    log = subprocess.run([route, "log", "--json", "-c", str(tmp_path / "learned.yaml")], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    assert [r["prompt"] for r in rows][0] == attempt
    assert rows[0]["score"] == pytest.approx(SCORER.score_text(attempt), abs=1e-6)
    assert SCORER.score_text(attempt) >= 0.5 > SCORER.score_text("Help me speed up a pair sum.")  # it could show
    assert rows[0]["tier"] == "strong"


OUTPUTS = CORPUS / "outputs"
MANIFEST = json.loads((OUTPUTS / "manifest.json").read_text())["fixtures"]
# Clients whose recorded failures carry their own say (a flag, a status line, an error report);
# OpenCode reports a failed command as its bare output, and nothing can tell it from a success.
FLAGS_FAILURES = {"claude-code", "codex", "gemini-cli", "qwen-code", "cline", "mini-swe-agent", "openhands"}


def _requests(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The client's successive requests of a recorded session: its body cut after each tool result."""
    body, path = record["body"], record["path"]
    key = "input" if path == "/v1/responses" else "contents" if path.startswith("/v1beta/") else "messages"
    items = body[key]

    def is_result(item: dict[str, Any]) -> bool:
        content = item.get("content", item.get("parts"))
        return (item.get("role") == "tool" or item.get("type") == "function_call_output"
                or isinstance(content, list) and any(isinstance(b, dict) and (b.get("type") == "tool_result"
                                                                              or "functionResponse" in b)
                                                     for b in content))

    cuts = [i + 1 for i, item in enumerate(items) if is_result(item)]
    first = next(i for i, item in enumerate(items) if item.get("role") == "user" or item.get("type") == "message")
    return [{**body, key: items[:cut]} for cut in [first + 1, *cuts]]


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["scenario"] in ("benign", "poll", "success", "fail")],
                         ids=lambda e: e["fixture"].removesuffix(".json"))
def test_recorded_outputs_move_a_session_only_when_the_step_failed(low_start, entry):
    """Issue 54 on what real clients sent back (tests/data/clients/outputs, recorded after the
    rules): polls of a running command, a passing output that prints "exited with code 1", a
    successful read never escalate; two failed commands do, where the client says they failed."""
    record = json.loads((OUTPUTS / entry["fixture"]).read_text())
    client = record["client"].split(" ")[0]
    headers = {"content-type": "application/json", "x-session-id": f"outputs-{entry['fixture']}"}
    tiers = []
    for body in _requests(record):
        answer = low_start.post(record["path"], content=json.dumps(body), headers=headers,
                            params={"alt": "sse"} if record["path"].startswith("/v1beta/") else None)
        assert answer.status_code == 200, answer.text
        tiers.append(TIERS.index(answer.headers["x-route-tier"]))
    assert tiers[0] < len(TIERS) - 1  # room to climb: a move would show
    failed_in_a_row = max((sum(1 for _ in run) for flag, run in __import__("itertools").groupby(
        r["failed"] for r in entry["results"]) if flag), default=0)
    if entry["scenario"] == "fail" and client in FLAGS_FAILURES and failed_in_a_row >= 2:
        assert tiers[-1] > tiers[0], tiers
    elif not any(r["failed"] for r in entry["results"]):
        assert tiers == [tiers[0]] * len(tiers), tiers


def test_at_the_terminal_a_system_prompt_of_ones_own_shows_nothing_of_a_client(sim, tmp_path):
    """`route -s "..."` and `route chat -s "..."`: the person typed the system prompt too, so it is
    no evidence of a client: a document they paste in tags is scored with their question. The
    same request from an application (the Python API, a server client) is a client's."""
    import subprocess
    import sys

    from tests.helpers import cli_config

    pasted = "Summarise the text below.\n\n<document>\nThe sky is blue because of Rayleigh scattering.\n</document>"
    route = str(Path(sys.executable).parent / "route")
    config = str(cli_config(tmp_path, sim.base_url))
    explained = subprocess.run([route, "--explain", "--json", "-c", config, "-s", "Be terse.", pasted],
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert explained.returncode == 0, explained.stderr
    task = json.loads(explained.stdout)["task"]
    assert task["scored_chars"] == len(pasted) and "context" not in task["set_aside"]
    with Router(load_config(config)) as router:  # an application's request: its system prompt is its own
        decision = router.explain([{"role": "system", "content": "Be terse."}, {"role": "user", "content": pasted}])
    assert decision.task is not None and decision.task.latest == "Summarise the text below."


@pytest.mark.parametrize("fixture", ["dspy-predict-chat-first", "dspy-cot-chat-first", "dspy-react-chat-first",
                                     "dspy-react-chat-tool-round-trip"])
def test_dspys_field_template_is_read_as_its_question(serve, fixture):
    """Issue 54: dspy's ChatAdapter writes `[[ ## question ## ]]` and its output instructions around
    the question, and declares those fields in its system prompt: "what is 2+2" scored 0.226 bare
    and 0.907 in dspy, so every ReAct step of an easy task went to the heavy tier."""
    for question in ("what is 2+2", "Prove that every finite integral domain is a field."):
        answer = _recorded(serve, fixture, question)
        assert float(answer.headers["x-route-score"]) == pytest.approx(SCORER.score_text(question), abs=1e-3)
        assert answer.headers["x-route-tier"] == _typed_tier(question)
