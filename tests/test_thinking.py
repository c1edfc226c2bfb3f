"""Thinking text is split out of answers: the parser on scripted text, and the HTTP path through
real sockets (the simulator) and OpenAI's `reasoning_content` field (a mock transport)."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.base import BackendSettings
from backends.openai_http import OpenAIBackend
from backends.thinking import CLOSE, OPEN, ThinkingSplitter, split_thinking, with_thinking
from backends.types import Completion, FinalChunk, Request, TextChunk, ThinkingChunk, Usage

pytestmark = pytest.mark.unit

THOUGHT = "the user asks about colour; Rayleigh scattering"
ANSWER = "The sky is blue because air scatters blue light most."
RAW = f"{OPEN}thought\n{THOUGHT}{CLOSE}{ANSWER}"
PROMPT = [{"role": "user", "content": "why is the sky blue"}]


def test_split_a_whole_text():
    assert split_thinking(RAW) == (THOUGHT, ANSWER)
    assert split_thinking(ANSWER) == ("", ANSWER)
    assert split_thinking(f"{OPEN}thought\nstill thinking when max_tokens hit") == ("still thinking when max_tokens hit", "")


@given(st.lists(st.integers(min_value=0, max_value=len(RAW)), max_size=12))
def test_any_way_of_cutting_the_stream_gives_the_same_split(cuts):
    bounds = [0, *sorted(cuts), len(RAW)]
    splitter = ThinkingSplitter()
    pieces = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        pieces += splitter.feed(RAW[start:end])
    pieces += splitter.close()
    assert "".join(t for kind, t in pieces if kind == "thinking") == THOUGHT
    assert "".join(t for kind, t in pieces if kind == "answer") == ANSWER
    assert not any(c in t for _, t in pieces for c in "<|>")  # no fragment of a marker leaks out


def test_with_thinking_counts_thinking_tokens_as_part_of_the_output():
    completion = Completion(text=RAW, backend="b", model="m", usage=Usage(10, 40))
    split = with_thinking(completion)
    assert split.text == ANSWER and split.thinking == THOUGHT
    assert 0 < split.usage.thinking_tokens < split.usage.output_tokens == 40
    assert with_thinking(Completion(text=ANSWER, backend="b", model="m")).thinking is None


def _backend(base_url: str, model: str = "thinker") -> OpenAIBackend:
    return OpenAIBackend(BackendSettings(name="dg", model=model, base_url=base_url, timeout_s=10))


@pytest.mark.integration
async def test_simulator_reply_with_markers_is_split_in_complete_and_stream(sim):
    sim.script("thinker", [RAW])
    backend = _backend(sim.base_url)
    try:
        completion = await backend.complete(Request(messages=PROMPT))
        chunks = [c async for c in backend.stream(Request(messages=PROMPT))]
    finally:
        await backend.aclose()
    assert completion.text == ANSWER and completion.thinking == THOUGHT
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == ANSWER
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingChunk)) == THOUGHT
    final = chunks[-1]
    assert isinstance(final, FinalChunk) and final.completion.text == ANSWER and final.completion.thinking == THOUGHT


def _reasoning_server(request: httpx.Request) -> httpx.Response:
    """vLLM with a reasoning parser: the thought comes apart, as `reasoning_content`."""
    body = json.loads(request.content)
    if not body.get("stream"):
        message = {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 5, "completion_tokens": 30}})
    deltas = [{"reasoning_content": THOUGHT[:10]}, {"reasoning_content": THOUGHT[10:]}, {"content": ANSWER}]
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


@pytest.mark.integration
async def test_reasoning_content_becomes_thinking_never_answer(answering):
    backend = _backend(answering(_reasoning_server))
    try:
        completion = await backend.complete(Request(messages=PROMPT))
        chunks = [c async for c in backend.stream(Request(messages=PROMPT))]
    finally:
        await backend.aclose()
    assert completion.text == ANSWER and completion.thinking == THOUGHT and completion.usage.thinking_tokens > 0
    # the two thinking events arrive in one read and may come up merged (backends/base.py)
    kinds = [type(c) for c in chunks if isinstance(c, ThinkingChunk | TextChunk)]
    assert kinds == sorted(kinds, key=lambda kind: kind is TextChunk)  # thinking first, then the answer
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingChunk)) == THOUGHT
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == [ANSWER]
    assert chunks[-1].completion.text == ANSWER and chunks[-1].completion.thinking == THOUGHT


@pytest.mark.integration
async def test_engine_server_sends_thinking_apart_as_reasoning_content(sim):
    """simulator -> OpenAI backend (splits the markers) -> `route engine serve`'s wire format
    (`reasoning_content`) -> an OpenAI backend reading it: the thought never becomes answer text."""
    import asyncio

    from router.engine_server import EngineServer

    sim.script("thinker", [RAW])
    upstream = _backend(sim.base_url)
    server = EngineServer(upstream, port=0, served_name="dg")
    await asyncio.to_thread(server.start)
    client = _backend(server.base_url, model="dg")
    try:
        plain = await client.complete(Request(messages=PROMPT))
        chunks = [c async for c in client.stream(Request(messages=PROMPT))]
        raw = httpx.post(f"{server.base_url}/chat/completions", json={"model": "dg", "messages": PROMPT}).json()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
        await upstream.aclose()
    assert raw["choices"][0]["message"] == {"role": "assistant", "content": ANSWER, "reasoning_content": THOUGHT}
    assert raw["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    assert plain.text == ANSWER and plain.thinking == THOUGHT
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingChunk)) == THOUGHT
    assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == ANSWER


@pytest.mark.integration
async def test_an_arbiter_sees_answers_never_thoughts(sim):
    import dataclasses

    from router.consortium.simulated import arbiter_responder
    from tests.helpers import router_for

    sim.script("glm-5.2", [RAW])
    prompts: list[str] = []
    judge = arbiter_responder(confidence=0.9)

    def recording(messages):
        prompts.append(json.dumps(messages))
        return judge(messages)

    state = sim.app.state.sim
    state.profiles["mercury-2"] = dataclasses.replace(state.profile("mercury-2"), responder=recording)
    router = router_for(sim, "  panel:\n    members: [glm-5.2*2]\n    arbiter: mercury-2\n    judging: rank\n")
    async with router:
        result = await router.acomplete("why is the sky blue", model="panel")
    assert prompts and all(ANSWER in p and THOUGHT not in p and OPEN not in p for p in prompts)
    assert result.completion.text == ANSWER


# ------------------------------------------------------------------ `route "prompt"` and thinking


def _route(*args: str, env: dict | None = None):
    """The real console script in a subprocess, stdout and stderr apart, as a shell runs it."""
    import os
    import subprocess
    import sys

    full_env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "router.cli", *args], capture_output=True, text=True, env=full_env,
                          timeout=60, stdin=subprocess.DEVNULL)


def _thinker_config(tmp_path, sim) -> str:
    sim.update_profile("sim-thinker", thinking_tokens=12, answer_tokens=20)
    path = tmp_path / "cfg.yaml"
    path.write_text(f"backends:\n  thinker: {{kind: openai, model: sim-thinker, base_url: {sim.base_url}}}\n"
                    "routing:\n  tiers:\n    - {name: all, backends: [thinker]}\n")
    return str(path)


SIM_THOUGHT = "[simulated thinking sim-thinker]"


@pytest.mark.integration
def test_the_simulator_thinks_when_its_profile_says_so_and_stays_labelled(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    raw = httpx.post(f"{sim.base_url}/chat/completions", json={"model": "sim-thinker", "messages": PROMPT}).json()
    content = raw["choices"][0]["message"]["content"]
    assert content.startswith(f"{OPEN}thought\n{SIM_THOUGHT}") and f"{CLOSE}[simulated sim-thinker]" in content
    assert raw["usage"]["completion_tokens"] == 12 + 20 and config


@pytest.mark.integration
def test_cli_hides_thinking_by_default_streamed_or_not(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    for mode in ("--stream", "--no-stream"):
        result = _route("-c", config, mode, "why is the sky blue")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("[simulated sim-thinker]") and "thinking" not in result.stdout
        assert SIM_THOUGHT not in result.stderr and OPEN not in result.stdout + result.stderr


@pytest.mark.integration
def test_cli_show_thinking_prints_the_thought_on_stderr_and_only_the_answer_on_stdout(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    hidden = _route("-c", config, "why is the sky blue")
    for mode in ("--stream", "--no-stream"):
        shown = _route("-c", config, mode, "--show-thinking", "why is the sky blue")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == hidden.stdout  # `route ... > out.txt` stores the answer alone
        thought_line = next(line for line in shown.stderr.splitlines() if SIM_THOUGHT in line)
        assert thought_line.startswith(SIM_THOUGHT) and "[simulated sim-thinker]" not in thought_line
        assert "SIMULATED" in shown.stderr and OPEN not in shown.stderr


@pytest.mark.integration
def test_cli_show_thinking_is_dimmed_on_a_colour_terminal_and_kept_with_quiet(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    coloured = _route("-c", config, "--show-thinking", "why is the sky blue", env={"FORCE_COLOR": "1"})
    dim = re.compile(r"\x1b\[2m(.*?)\x1b\[0m", re.S)  # ANSI dim ... reset (the thought streams in pieces)
    assert SIM_THOUGHT in "".join(dim.findall(coloured.stderr)) and "thinking" not in dim.sub("", coloured.stderr)
    quiet = _route("-c", config, "-q", "--show-thinking", "why is the sky blue")
    assert quiet.stderr.startswith(SIM_THOUGHT) and "→" not in quiet.stderr


@pytest.mark.integration
def test_cli_watch_shows_thinking_only_when_asked(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    plain = _route("-c", config, "--watch", "why is the sky blue")
    shown = _route("-c", config, "--watch", "--show-thinking", "why is the sky blue")
    assert plain.returncode == shown.returncode == 0, shown.stderr
    assert plain.stdout == shown.stdout and plain.stdout.startswith("[simulated sim-thinker]")
    assert SIM_THOUGHT not in plain.stderr + plain.stdout and SIM_THOUGHT in shown.stderr


@pytest.mark.integration
def test_cli_json_has_thinking_under_its_own_key(sim, tmp_path):
    config = _thinker_config(tmp_path, sim)
    doc = json.loads(_route("-c", config, "--json", "why is the sky blue").stdout)
    assert doc["thinking"].startswith(SIM_THOUGHT) and doc["text"].startswith("[simulated sim-thinker]")
    assert SIM_THOUGHT not in doc["text"] and doc["usage"]["thinking_tokens"] > 0 and doc["simulated"] is True
    sim.update_profile("sim-thinker", thinking_tokens=0)
    assert "thinking" not in json.loads(_route("-c", config, "--json", "why is the sky blue").stdout)
