"""Gemini CLI's recorded requests (tests/data/clients/gemini-cli-*.json: its first request, a tool
round trip, a second turn) through `route serve`, over real HTTP on loopback, to an upstream that
speaks chat completions: each is answered in Gemini's shape, streamed as recorded (`?alt=sse`)
and not; what reaches the upstream is what the client sent, translated (system prompt, the 16
tools and their schemas, the call and its response matched by id, sampling and thinking
settings); the task is scored as the bare prompt is; one task is one session; and the request
is in `route log`. The key is sent as Gemini CLI sends it (`x-goog-api-key`). The real client is
never run here."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from router.cli.app import app as cli
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.answering import answering
from tests.helpers import ok_chat_answer

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).parent / "data" / "clients"
FIXTURES = ("gemini-cli-first", "gemini-cli-tool-round-trip", "gemini-cli-second-turn")
KEY = "gemini-test-key-0123456789abcdef"


def _record(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"{name}.json").read_text())


class Upstream:
    """Each chat body that reached the model server."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        return ok_chat_answer(body)


def _config(base_url: str, log_path: Path) -> dict[str, Any]:
    backend = {"kind": "openai", "model": "upstream-model", "base_url": base_url, "max_retries": 0, "timeout_s": 20}
    return {"backends": {"upstream": backend}, "routing": {"tiers": [{"name": "only", "backends": ["upstream"]}]},
            "aliases": {"gemini-*": "upstream"}, "log": {"path": str(log_path), "flush_interval_ms": 0}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Upstream, Router, Path]]:
    upstream = Upstream()
    folder = tmp_path_factory.mktemp("gemini-cli")
    with answering(upstream) as base_url:
        config = _config(base_url, folder / "route.db")
        config_file = folder / "config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        router = Router(load_config(config), source="server")
        with RouteServer(router, api_key=KEY) as server, httpx.Client(base_url=server.url, timeout=30) as http:
            yield http, upstream, router, config_file


def _post(http: httpx.Client, record: dict[str, Any], stream: bool, body: dict[str, Any] | None = None) -> httpx.Response:
    """The recorded request as Gemini CLI sent it (its headers, its key header), streamed as
    recorded or asked for whole at `:generateContent`."""
    path = record["path"] if stream else record["path"].replace(":streamGenerateContent", ":generateContent")
    headers = {**record["headers"], "x-goog-api-key": KEY}
    return http.post(path, params={"alt": "sse"} if stream else None, headers=headers,
                     content=json.dumps(record["body"] if body is None else body).encode())


def _events(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.headers["content-type"] == "text/event-stream"
    return [json.loads(line[len("data: "):]) for line in answer.text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("fixture", FIXTURES)
def test_answered_in_geminis_shape(served, fixture, stream):
    http, *_ = served
    answer = _post(http, _record(fixture), stream)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-route-backend"] == "upstream"
    if stream:
        events = _events(answer)
        assert all(e["candidates"][0]["content"]["role"] == "model" for e in events)
        text = "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
        last = events[-1]
        assert "finishReason" not in events[0]["candidates"][0] or len(events) == 1
    else:
        last = answer.json()
        text = "".join(p.get("text", "") for p in last["candidates"][0]["content"]["parts"])
    assert text == "ok"
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"] == {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11}
    assert last["modelVersion"] == "gemini-2.5-pro"


def test_what_reaches_the_upstream_is_what_the_client_sent(served):
    http, upstream, *_ = served
    record = _record("gemini-cli-tool-round-trip")
    sent = record["body"]
    assert _post(http, record, stream=True).status_code == 200
    body = upstream.bodies[-1]
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": sent["systemInstruction"]["parts"][0]["text"]}
    # the user turn's two parts stay two parts: the context part, then the task
    assert messages[1]["content"] == [{"type": "text", "text": p["text"]} for p in sent["contents"][0]["parts"]]
    call = sent["contents"][1]["parts"][0]["functionCall"]
    result = sent["contents"][2]["parts"][0]["functionResponse"]
    assert messages[2]["tool_calls"] == [{"id": call["id"], "type": "function", "function": {
        "name": "run_shell_command", "arguments": json.dumps(call["args"], separators=(",", ":"))}}]
    assert messages[3] == {"role": "tool", "tool_call_id": call["id"],
                           "content": json.dumps(result["response"], separators=(",", ":"))}
    declared = [d for t in sent["tools"] for d in t["functionDeclarations"]]
    assert [t["function"]["name"] for t in body["tools"]] == [d["name"] for d in declared]
    assert all(t["function"]["parameters"] == d["parametersJsonSchema"] and t["function"]["description"] == d["description"]
               for t, d in zip(body["tools"], declared, strict=True))
    assert (body["temperature"], body["top_p"], body["top_k"]) == (1, 0.95, 64)
    assert body["reasoning_effort"] == "high"  # thinkingBudget 8192
    assert body["stream"] is True


# Held-out tasks (none of them is a corpus fixture's words), easy and hard.
TASKS = ("hi", "What does ls -la do?", "Rename the variable x to count in utils.py.",
         "Explain the difference between a process and a thread.",
         "Design a lock-free concurrent hash map in Rust with resizing, prove its linearizability, and benchmark it "
         "against a mutex-based map.",
         "Implement the Raft consensus algorithm with log compaction and membership changes, and write "
         "property-based tests for its safety properties.")


@pytest.fixture(scope="module")
def tiered(sim) -> Iterator[httpx.Client]:
    """`route serve` with the shipped scorer and two tiers."""
    def backend(model: str) -> dict[str, Any]:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0}

    config = {"backends": {"light": backend("m-light"), "heavy": backend("m-heavy")},
              "routing": {"tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                                    {"name": "heavy", "backends": ["heavy"]}]},
              "aliases": {"*": "auto"}, "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server")) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def _decided(http: httpx.Client, body: dict[str, Any], stream: bool) -> tuple[str, float]:
    """The tier and score `route serve` routed `body` with."""
    method = "streamGenerateContent" if stream else "generateContent"
    answer = http.post(f"/v1beta/models/gemini-2.5-pro:{method}", params={"alt": "sse"} if stream else None, json=body)
    assert answer.status_code == 200, answer.text
    return answer.headers["x-route-tier"], float(answer.headers["x-route-score"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_task_is_scored_as_the_bare_prompt_is(tiered, stream):
    """Gemini CLI's system prompt, its 16 tools and the <session_context> part it sends before
    the task are its harness: the task inside them lands on the tier the bare prompt does."""
    record = _record("gemini-cli-first")
    for task in TASKS:
        body = copy.deepcopy(record["body"])
        body["contents"][-1]["parts"][-1]["text"] = task
        (tier, score), (bare_tier, bare_score) = (
            _decided(tiered, body, stream), _decided(tiered, {"contents": [{"role": "user", "parts": [{"text": task}]}]},
                                                     stream))
        assert tier == bare_tier and abs(score - bare_score) <= 0.03, f"{task!r}: {score} against {bare_score}"
    bare_tiers = {_decided(tiered, {"contents": [{"parts": [{"text": t}]}]}, stream)[0] for t in TASKS}
    assert bare_tiers == {"light", "heavy"}  # the tasks span both tiers, so a shift would show


def test_one_task_is_one_session_and_another_task_another(tiered):
    """Gemini's protocol names no session: the router derives it from the task, so the session's
    first request, its tool round trip and its second turn are one session, and another task
    in the same harness is another."""
    def session(record: dict[str, Any], body: dict[str, Any] | None = None) -> str:
        answer = tiered.post(record["path"], params={"alt": "sse"}, json=record["body"] if body is None else body)
        assert answer.status_code == 200, answer.text
        return answer.headers["x-route-session"]

    one = {session(_record(name)) for name in FIXTURES}
    assert len(one) == 1 and next(iter(one)).startswith("auto-")
    first = _record("gemini-cli-first")
    other = copy.deepcopy(first["body"])
    other["contents"][-1]["parts"][-1]["text"] = "Add type hints to every function in greet.py."
    assert session(first, other) not in one


def test_the_request_is_in_route_log(served):
    http, _, router, config_file = served
    record = _record("gemini-cli-first")
    body = copy.deepcopy(record["body"])
    body["contents"][-1]["parts"][-1]["text"] = "Count the lines of greet.py."
    assert _post(http, record, stream=True, body=body).status_code == 200
    assert router.request_log is not None and router.request_log.flush()
    shown = CliRunner().invoke(cli, ["log", "--json", "-c", str(config_file)])
    assert shown.exit_code == 0, shown.output
    latest = json.loads(shown.stdout.splitlines()[0])
    assert latest["status"] == "ok" and latest["backend"] == "upstream"
    assert "Count the lines of greet.py." in latest["prompt"]
    assert KEY not in shown.stdout
