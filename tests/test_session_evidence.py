"""Evidence that generalizes (issue 46): a session reads failure from the structure clients send
-- error flags, exit codes, a call of a tool the request does not offer (OpenCode's `invalid`),
the same call repeated, the task restated -- not from phrases; and after it moves up, the count
of failed steps starts again. Through the real path: the shipped scorer, simulated backends on
loopback, `Router` sessions and `route serve`."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from benchmarks.harness import CORPUS
from policies.sessions import restated, tool_failed
from router import Router
from router.config_loader import load_config
from router.server import RouteServer

pytestmark = pytest.mark.integration

TASK = "Rename the variable `cnt` to `count` in utils.py."
TIERS = ("local", "fast", "frontier")


@pytest.fixture
def router(sim):
    backends = {n: {"kind": "openai", "model": f"m-{n}", "base_url": sim.base_url, "max_retries": 0} for n in TIERS}
    config = {"backends": backends,
              "routing": {"scorer": {"kind": "learned"},
                          "tiers": [{"name": "local", "below": 0.45, "backends": ["local"]},
                                    {"name": "fast", "below": 0.9, "backends": ["fast"]},
                                    {"name": "frontier", "backends": ["frontier"]}]}}
    with Router(load_config(config)) as router:
        yield router


def _round(i: int, output: str, name: str = "run", arguments: str | None = None) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments or f'{{"n": {i}}}'}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": output}]


def test_the_failure_count_starts_again_when_a_session_moves_up(router):
    """Before: after two failures moved the session up, the count stayed at two, so the next
    failure moved it again at once (router/sessions.py kept `tool_errors` through the move)."""
    session = router.session()
    messages = [{"role": "user", "content": TASK}]
    assert session.complete(messages).decision.tier == "local"
    failing = "Exit code: 1\nOutput:\nsed: can't read utils.py: No such file"
    tiers = []
    for i in range(4):
        messages += _round(i, failing)
        tiers.append(session.complete(messages).decision.tier)
    # two failures move it up; the third is the new tier's first; the fourth its second
    assert tiers == ["local", "fast", "fast", "frontier"]


def test_a_success_between_failures_breaks_the_run(router):
    session = router.session()
    messages = [{"role": "user", "content": TASK}]
    session.complete(messages)
    for i, output in enumerate(["Exit code: 1\nboom", "Exit code: 0\nok", "Exit code: 1\nboom"]):
        messages += _round(i, output)
        result = session.complete(messages)
    assert result.decision.tier == "local"


def _opencode_invalid_call(body: dict[str, Any], i: int) -> list[dict[str, Any]]:
    """OpenCode's answer to a malformed call, as its recorded body would carry it: the call
    rewritten to its hidden `invalid` tool, and that tool's result."""
    call = {"id": f"call_invalid_{i}", "type": "function",
            "function": {"name": "invalid", "arguments": json.dumps(
                {"tool": "bash", "error": "Invalid input for tool bash: JSON parsing failed"})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_invalid_{i}",
             "content": "The arguments provided to the tool are invalid: Invalid input for tool bash: JSON parsing "
                        "failed"}]


def test_opencodes_invalid_tool_results_are_tool_errors_through_route_serve(router):
    record = json.loads((CORPUS / "opencode-chat-reasoning-tool-round-trip.json").read_text())
    body = copy.deepcopy(record["body"])
    assert "invalid" not in {t["function"]["name"] for t in body["tools"]}  # hidden from the model
    first_turn = [m for m in body["messages"] if m["role"] in ("system", "user")][:2]
    body.update(model="auto", stream=False, messages=first_turn)
    body.pop("stream_options")
    headers = {"x-session-id": "opencode-invalid"}
    with RouteServer(router) as srv:
        post = lambda: httpx.post(f"{srv.base_url}/chat/completions", json=body, headers=headers, timeout=30)  # noqa: E731
        first = post()
        assert first.status_code == 200, first.text
        start = first.headers["x-route-tier"]
        for i in range(2):
            body["messages"] = [*body["messages"], *_opencode_invalid_call(body, i)]
            answer = post()
        assert answer.status_code == 200, answer.text
    assert start == "local" and answer.headers["x-route-tier"] == "fast"
    # the same results answering a tool the request offers say nothing: the call is what failed
    assert tool_failed(_opencode_invalid_call(body, 9)[1]["content"]) is None


def test_a_tool_call_repeated_with_the_same_arguments_after_it_failed_moves_the_session_up(router):
    session = router.session()
    messages = [{"role": "user", "content": TASK}]
    session.complete(messages)
    failing = "Exit code: 2\nWall time: 0.1 seconds\nOutput:\ngrep: utils.py: No such file or directory"
    messages += _round(0, failing, name="grep", arguments='{"pattern": "cnt"}')
    assert session.complete(messages).decision.tier == "local"  # one failed step: normal agent work
    # the very same call again, answered with plain output: the repetition after the failure says it
    messages += _round(1, "utils.py", name="grep", arguments='{"pattern": "cnt"}')
    result = session.complete(messages)
    assert result.decision.tier == "fast" and "same tool call with the same arguments" in result.decision.reason


def test_the_same_call_after_one_that_succeeded_is_polling_not_a_stuck_model(router):
    """Issue 54: Codex's `write_stdin` and Claude Code's `BashOutput` poll a running command with
    the very same call; two identical successful calls escalated a session for good."""
    session = router.session()
    messages = [{"role": "user", "content": TASK}]
    session.complete(messages)
    for i in range(4):
        messages += _round(i, f"still running: {i * 10}% done", name="BashOutput", arguments='{"bash_id": "b1"}')
        result = session.complete(messages)
        assert result.decision.tier == "local", result.decision.reason
    # a re-run after another step is not a repetition
    again = router.session()
    ask = [{"role": "user", "content": TASK}]
    again.complete(ask)
    for i, (name, args) in enumerate([("pytest", "{}"), ("edit", '{"file": "utils.py"}'), ("pytest", "{}")]):
        ask += _round(i, "ok", name=name, arguments=args)
        assert again.complete(ask).decision.tier == "local"


def test_the_user_restating_the_task_in_other_words_around_it_is_asking_again(router):
    session = router.session()
    messages = [{"role": "user", "content": TASK}]
    session.complete(messages)
    messages += [{"role": "assistant", "content": "Done."},
                 {"role": "user", "content": f"Again, please: {TASK} It is still called cnt."}]
    result = session.complete(messages)
    assert result.decision.tier == "fast" and "repeated" in result.decision.reason
    # a follow-up that names a word of the task is not a restatement
    assert not restated("Now also rename `total` in utils.py to `sum`.", [TASK])


@pytest.mark.parametrize("output", [
    # recorded successful results (tests/data/clients): Qwen Code's header, mini-swe-agent's JSON, Cline's JSON
    "Command: echo corpus-ok\nDirectory: (root)\nOutput: corpus-ok\nError: (none)\nExit Code: 0\nSignal: 0",
    '{\n  "returncode": 0,\n  "output": "corpus-ok\\n"\n}',
    '[{"query":"echo corpus-ok","result":"corpus-ok\\n","success":true}]',
    # a passing test run that prints "error" in its file and test names, with its exit status
    "tests/test_error_handling.py::test_error_message PASSED\n1 passed in 0.02s\nExit code: 0",
    # plain output that mentions errors says nothing either way
    "src/errors.py\nsrc/error_codes.py\nlogs/error.log",
])
def test_a_successful_result_that_prints_error_is_not_a_failure(output: str):
    assert tool_failed(output) is not True


@pytest.mark.parametrize("output", [
    "Exit code: 2\nWall time: 0.3 seconds\nOutput:\nnpm warn: peer dependency missing; build stopped",
    '{"returncode": 1, "output": "panic: index out of range [3] with length 3"}',
    '[{"query":"cat Paris","result":"","error":"ENOENT: no such file or directory","success":false}]',
    "Error: permission denied",  # Anthropic's is_error, as the server's dialect writes it
    "segmentation fault\n[The command completed with exit code 139.]",
])
def test_a_failure_in_any_wording_is_read_from_its_flag_or_exit_status(output: str):
    assert tool_failed(output) is True


def test_a_call_outside_a_list_with_a_tool_of_another_kind_is_not_judged():
    """A namespace of tools (Codex), a provider's built-in tool, a local shell: their calls may
    carry names the list of tools does not, so a call's name says nothing there."""
    from policies.sessions import read_turn

    messages = [{"role": "user", "content": TASK}, *_round(0, "ok", name="spawn_agent")]
    namespaced = [{"type": "function", "name": "exec_command"},
                  {"type": "namespace", "name": "multi_agent_v1", "tools": [{"name": "spawn_agent"}]}]
    assert read_turn(messages, tools=namespaced).tool_errors == 0
    assert read_turn(messages, tools=[{"type": "function", "function": {"name": "exec_command"}}]).tool_errors == 1


def _text_agent_step(i: int, returncode: int, output: str) -> list[dict[str, Any]]:
    """A text agent's step (mini-swe-agent's text mode, a ReAct loop): the command in the
    model's text, its output reported in the next user turn."""
    return [{"role": "assistant", "content": f"THOUGHT: step {i}.\n```bash\nstep-{i}\n```"},
            {"role": "user", "content": f"<returncode>{returncode}</returncode>\n<output>\n{output}\n</output>"}]


def test_a_text_agents_reported_output_is_a_step_of_the_task_not_the_task_asked_again(router):
    """Before: a user turn holding only a tool's output had no words of the user's, so the
    session read the task's own words as the latest turn: the task sent again, escalated."""
    session = router.session()
    messages = [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
                {"role": "user", "content": TASK}]
    session.complete(messages)
    for i in range(4):
        messages += _text_agent_step(i, 0, f"utils.py line {i}: cnt = cnt + 1")
        result = session.complete(messages)
        assert result.decision.tier == "local", result.decision.reason
    for i in range(4, 6):  # two failing steps in a row, read from their return codes
        messages += _text_agent_step(i, 1, "sed: -e expression #1, char 5: unterminated `s' command")
        result = session.complete(messages)
    assert result.decision.tier == "fast" and "failed tool results" in result.decision.reason
