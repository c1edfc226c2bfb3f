"""Consortia in agent loops: with `rank`, members may answer with tool calls and the winner's
call is returned as it is (streamed as tool-call chunks too); `synthesis` with tools is refused
with the reason; explain() says that it was the tools, not the deadline, that skipped a tier."""

from __future__ import annotations

import pytest

from backends.errors import Unsupported
from backends.types import FinalChunk, TextChunk, ToolCallChunk
from router.config_loader import load_config
from router.core import Router
from tests.helpers import use_arbiter

pytestmark = pytest.mark.integration

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = {"tool_calls": [{"id": "call_7", "name": "get_weather", "arguments": {"city": "Paris"}}]}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _router(sim) -> Router:
    use_arbiter(sim, "judge-m")  # ranks the shortest candidate first: here, the tool call

    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, "timeout_s": 20}

    return Router(load_config({
        "backends": {"caller": backend("m-caller"), "talker": backend("m-talker"), "judge": backend("judge-m"),
                     "big": backend("m-big")},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 10},
                    "tiers": [{"name": "light", "below": 0.5, "backends": ["caller"]},
                              {"name": "panel", "below": 0.9, "backends": ["cns-synth"]},
                              {"name": "frontier", "backends": ["big"]}]},
        "consortia": {"cns-rank": {"members": ["caller", "talker"], "arbiter": "judge", "judging": "rank"},
                      "cns-synth": {"members": ["caller", "talker"], "arbiter": "judge", "judging": "synthesis"}},
    }), source="api", log=False)


def _script(sim) -> None:
    sim.script("m-caller", [CALL])
    sim.script("m-talker", ["I do not know the weather in Paris, but it is often mild in spring and autumn."])


async def test_a_ranked_consortium_returns_the_winning_members_tool_call_as_is(sim):
    _script(sim)
    async with _router(sim) as router:
        result = await router.acomplete(ASK, model="cns-rank", tools=TOOLS)
    completion = result.completion
    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls == [{"id": "call_7", "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    trace = completion.metadata["trace"]
    assert trace["rounds"][0]["arbiter"]["status"] == "done"  # judged, not a fallback
    assert trace["rounds"][0]["arbiter"]["order"][0] == "caller#1"
    assert sim.stats("m-caller")["requests"] == 1 and sim.stats("m-talker")["requests"] == 1


async def test_a_ranked_consortium_streams_the_winning_call_before_the_final_chunk(sim):
    _script(sim)
    async with _router(sim) as router:
        chunks = [c async for c in router.astream(ASK, model="cns-rank", tools=TOOLS)]
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.index, c.id, c.name, c.arguments) for c in calls] == [(0, "call_7", "get_weather", '{"city": "Paris"}')]
    assert not [c for c in chunks if isinstance(c, TextChunk) and c.text]
    assert isinstance(chunks[-1], FinalChunk) and chunks[-1].completion.tool_calls[0]["id"] == "call_7"


async def test_synthesis_with_tools_is_refused_with_the_reason(sim):
    async with _router(sim) as router:
        with pytest.raises(Unsupported, match="judges by synthesis: its arbiter writes a new answer"):
            await router.acomplete(ASK, model="cns-synth", tools=TOOLS)
        with pytest.raises(Unsupported, match="cannot return an answer held to the response format"):
            router.explain(ASK, model="cns-synth", response_format={"type": "json_object"})
    assert sim.stats("m-caller")["requests"] == 0


def test_explain_names_the_tools_as_the_reason_a_tier_was_skipped(sim):
    """The prompt scores for the `panel` tier, whose only backend is a synthesis consortium: with
    tools it escalates, and the reason says why (not "nothing meets the deadline")."""
    with _router(sim) as router:
        prompt = "Is it raining in Paris? x"  # length score between the two thresholds
        plain = router.explain(prompt)
        decision = router.explain(prompt, tools=TOOLS)
    assert plain.tier == "panel" and plain.chosen == "cns-synth"
    assert decision.chosen == "big"
    assert "meets the deadline" not in decision.reason
    assert "nothing in tier 'panel' can take this request (cns-synth cannot take `tools`: consortium 'cns-synth' " \
           "judges by synthesis" in decision.reason
