"""A tool-call answer counts as an answer in the latency model (issue 37): the output a tool call
carries is tokens, so an agent's next call is predicted from what the backend's calls are, not
from a tool call read as one slow first token.

The learning is driven with exact timings (the attempts a backend's call path hands the latency
tracker), so nothing here depends on the machine; the answers themselves are assembled by the
real code (backends/assembly.py) from what a server sent, and the simulator's counts are checked
over real sockets.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from backends.assembly import Assembly, Delta
from backends.types import Completion, Request, Timings, Usage
from router.config_loader import load_config
from router.core import Router
from router.decision import Attempt
from tests.helpers import call

FIRST_S, PER_TOKEN_S = 1.0, 0.04  # how the backend answers: a second to start, 25 tokens/s after
CALL = {"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "apply_patch", "arguments": json.dumps({"patch": "x = 1\n" * 60})}}
AGENT_TURN = [{"role": "user", "content": "fix the failing test"}]
WRITTEN = len(CALL["function"]["name"] + CALL["function"]["arguments"]) // 4  # tokens the model wrote for the call


def _router() -> Router:
    backend = {"kind": "openai", "model": "m-coder", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
    return Router(load_config({
        "backends": {"coder": backend},
        "routing": {"tiers": [{"name": "agent", "backends": ["coder"], "deadline_ms": 10_000,
                               "on_deadline_risk": "fail"}]}}), log=False)


def _timed(completion: Completion, tokens: int) -> Attempt:
    """`completion`, which took as long as `tokens` take at the backend's pace (whatever its
    usage says): total = first + (tokens - 1) x per token."""
    total = FIRST_S + (tokens - 1) * PER_TOKEN_S
    return Attempt(backend="coder", elapsed_s=total,
                   completion=dataclasses.replace(completion, timings=Timings(ttft_s=None, total_s=total)))


def _text_answer(tokens: int) -> Completion:
    return Completion(text="w " * tokens, backend="coder", model="m-coder", finish_reason="stop",
                      usage=Usage(input_tokens=500, output_tokens=tokens))


def _tool_call_answer(router: Router) -> Completion:
    """A tool call as the backend assembles it from a server that reported no usage."""
    answer = Assembly(router.backend("coder"))
    answer.apply(Delta(tool_calls=[CALL], finish_reason="tool_calls"))
    return answer.completion()


def _p95(router: Router) -> float:
    decision = router.decide(AGENT_TURN)
    assert not decision.plan.refused, decision.plan.refused
    return decision.plan.candidates[0].prediction.p95_s


@pytest.mark.unit
def test_a_tool_call_answer_carries_its_arguments_as_output_tokens():
    with _router() as router:
        completion = _tool_call_answer(router)
    assert completion.tool_calls and completion.text == ""
    assert completion.usage.output_tokens == WRITTEN
    assert completion.metadata["usage_estimated"] is True


@pytest.mark.unit
def test_a_tool_call_answer_does_not_raise_the_next_calls_predicted_latency():
    """Text answers of 150 tokens teach a p95 under the 10 s deadline; a tool call of ~110 tokens
    at the same pace must not move it up (read as a 5.4 s first token, it made the agent's next
    call fail DeadlineAtRisk)."""
    with _router() as router:
        for _ in range(20):
            router.latency.observe(_timed(_text_answer(150), 150))
        before = _p95(router)
        assert before < 10.0
        router.latency.observe(_timed(_tool_call_answer(router), WRITTEN))
        after = _p95(router)
    assert after <= before


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_simulator_counts_a_tool_calls_output_as_a_provider_does(sim, kind, stream):
    """The simulator reports a tool call's pieces (paced like tokens) as output tokens, plain and
    streamed, in both of its protocols."""
    from backends.anthropic_http import AnthropicBackend
    from backends.base import BackendSettings
    from backends.openai_http import OpenAIBackend

    sim.script("m-tools", [{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}])
    settings = BackendSettings(name="b", model="m-tools", base_url=sim.base_url, max_retries=0)
    backend = (OpenAIBackend if kind == "openai" else AnthropicBackend)(settings)
    request = Request(messages=[{"role": "user", "content": "weather?"}],
                      extra={"tools": [{"type": "function", "function": {"name": "get_weather"}}]})
    try:
        if stream:
            completion = [c async for c in backend.stream(request)][-1].completion
        else:
            completion = await call(backend, request)
    finally:
        await backend.aclose()
    assert completion.tool_calls and completion.usage.output_tokens == 4  # the call's header, then 3 argument pieces
    assert "usage_estimated" not in completion.metadata
