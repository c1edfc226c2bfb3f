"""Streaming a consortium's answer: the synthesis goes out as the arbiter writes it (final round
only), the chunks always add up to the final text, and a failure after text went out is raised."""

from __future__ import annotations

import dataclasses

import pytest

from backends.errors import BackendError
from backends.types import FinalChunk, TextChunk
from router.config_loader import parse_config
from router.consortium.answer_stream import AnswerStream
from router.consortium.simulated import arbiter_responder, read_candidates
from router.core import Router
from tests.gated_upstream import Reply, gated
from tests.helpers import ask, build, fake, router_for

pytestmark = pytest.mark.unit


async def collect(stream):
    chunks, final = [], None
    async for chunk in stream:
        if isinstance(chunk, TextChunk):
            chunks.append(chunk.text)
        elif isinstance(chunk, FinalChunk):
            final = chunk.completion
    return chunks, final


def test_answer_stream_matches_the_parser_however_the_reply_is_cut():
    import re

    reply = ("<ranking-ab>1</ranking-ab><confidence-ab>0.9</confidence-ab>\n<answer-ab>\n  Hello  world\n"
             " and </answer-a b> more </answer-ab>\ntrailing")
    expected = re.search(r"<answer-ab>(.*?)</answer-ab>", reply, re.S).group(1).strip()
    for size in (1, 2, 3, 7, 1000):
        out: list[str] = []
        stream = AnswerStream("ab", lambda prefix: "0.9" in prefix, out.append)
        for i in range(0, len(reply), size):
            stream.feed(reply[i:i + size])
        assert "".join(out) == expected and stream.closed
    held: list[str] = []
    not_final = AnswerStream("ab", lambda prefix: False, held.append)
    not_final.feed(reply)
    assert held == [] and not not_final.active


async def test_only_the_final_rounds_synthesis_is_streamed():
    confidences = iter([0.3, 0.95])

    def respond(req):
        return arbiter_responder(confidence=next(confidences))(req.messages)

    member = fake("m", responder=lambda req: f"draft {len(req.messages)} of a longer answer here")
    reg = build({"m": member, "arb": fake("arb", responder=respond)},
                {"c": {"members": ["m*2"], "arbiter": "arb", "judging": "synthesis", "max_iterations": 3}})
    chunks, final = await collect(reg["c"].stream(ask()))
    rounds = final.metadata["trace"]["rounds"]
    assert len(rounds) == 2 and len(chunks) > 3  # word by word, as the fake arbiter "writes"
    assert "".join(chunks) == final.text == rounds[1]["answer"] == "draft 3 of a longer answer here"


async def test_unclosed_answer_tag_keeps_the_streamed_text_as_the_answer():
    def truncated(req):
        nonce, _ = read_candidates(req.messages)
        return (f"<ranking-{nonce}>1, 2</ranking-{nonce}> <confidence-{nonce}>0.9</confidence-{nonce}> "
                f"<answer-{nonce}>a partial synthesis cut by max_tokens")

    reg = build({"a": fake("a", responder=lambda r: "one"), "b": fake("b", responder=lambda r: "two"),
                 "arb": fake("arb", responder=truncated)},
                {"c": {"members": ["a", "b"], "arbiter": "arb", "judging": "synthesis"}})
    chunks, final = await collect(reg["c"].stream(ask()))
    assert "".join(chunks) == final.text == "a partial synthesis cut by max_tokens"
    assert "never closed" in final.metadata["trace"]["rounds"][0]["arbiter"]["fallback"]


async def test_rank_answer_arrives_whole_and_listeners_hear_it_start():
    reg = build({"a": fake("a", responder=lambda r: "alpha beta"), "arb": fake("arb", responder=lambda r: "?")},
                {"c": {"members": ["a*2"], "arbiter": "arb"}})
    events: list[dict] = []
    reg["c"].add_listener(events.append)
    chunks, final = await collect(reg["c"].stream(ask()))
    assert chunks == ["alpha beta"] and final.text == "alpha beta"
    assert [e["type"] for e in events].count("answer") == 1


@pytest.mark.integration
async def test_synthesis_streams_over_http_before_the_arbiter_finishes(sim):
    """The arbiter's reply comes in two parts over real HTTP, the second only once the test has
    seen the answer's first words: had they waited for the whole reply, the second part would
    have gone unreleased (after its wait), and the test says so. No clock is read."""
    sim.update_profile("glm-5.2", ttft_s=0.02, tokens_per_s=None, answer_tokens=120)
    respond = arbiter_responder(confidence=0.9)

    def answer(body: dict, key: str) -> Reply:
        reply = respond(body["messages"])
        cut = reply.index("<answer-") + 60  # inside the answer, after its first words
        return Reply(parts=[[{"content": reply[:cut]}], [{"content": reply[cut:]}]], message={"content": reply})

    texts: list[str] = []
    with gated(answer, wait_s=10) as upstream:
        router = Router(parse_config(f"""\
backends:
  glm-5.2: {{kind: openai, model: glm-5.2, base_url: "{sim.base_url}"}}
  judge: {{kind: openai, model: judge, base_url: "{upstream.base_url}", max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [glm-5.2]}}]
consortia:
  cns: {{members: [glm-5.2*2], arbiter: judge, judging: synthesis}}
""", "gated.yaml"))
        async with router:
            stream = router.astream("Explain CRDTs.", model="cns")
            async for chunk in stream:
                if isinstance(chunk, TextChunk):
                    if not texts:
                        upstream.release()  # the rest of the arbiter's reply may go now
                    texts.append(chunk.text)
    assert "".join(texts) == stream.result.text and len(texts) > 1
    assert upstream.unreleased == 0  # the first words came before the rest of the reply was sent


@pytest.mark.integration
async def test_arbiter_failing_after_text_went_out_is_raised_not_retried(sim):
    sim.update_profile("glm-5.2", ttft_s=0.02, tokens_per_s=None)
    state = sim.app.state.sim
    state.profiles["mercury-2"] = dataclasses.replace(state.profile("mercury-2"), decoding="autoregressive",
                                                     ttft_s=0.02, tokens_per_s=500.0,
                                                     responder=arbiter_responder(confidence=0.9))
    sim.set_faults("mercury-2", ["drop"])
    router = router_for(sim, "  cns:\n    members: [glm-5.2*2]\n    arbiter: mercury-2\n    judging: synthesis\n")
    texts: list[str] = []
    async with router:
        with pytest.raises(BackendError):
            async for chunk in router.backend("cns").stream(ask()):
                if isinstance(chunk, TextChunk):
                    texts.append(chunk.text)
    assert texts  # part of the answer had gone out...
    assert sim.stats("mercury-2")["requests"] == 1  # ...so the arbiter was not asked again
