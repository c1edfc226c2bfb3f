"""`route chat` and `route --continue` in process: what a typed message is, which words are asked
about before they are sent, and a conversation read back from a real request log file."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import typer

from router.cli.app import app
from router.cli.commands.chat import Typed, read_message
from router.cli.conversation import resume
from router.cli.dispatch import AskFirst, NotAPrompt, dispatch
from router.store import RequestRecord, Store

pytestmark = pytest.mark.unit


def _reader(lines: list[str]):
    """`input` typed ahead: each call returns the next line; EOFError when none is left."""
    given: Iterator[str] = iter(lines)
    prompts: list[str] = []

    def read(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(given)
        except StopIteration:
            raise EOFError from None

    return read, prompts


@pytest.mark.parametrize("lines, typed", [
    (["hello there"], Typed("hello there", True)),
    (["first \\", "second\\", "third"], Typed("first \nsecond\nthird", False)),
    (["!multi", "a", "", "  b", "!end"], Typed("a\n\n  b", False)),
    (["!multi END", "a", "!end", "!end END"], Typed("a\n!end", False)),  # a marked block holds a bare !end
    (["/multi", "x", "/end"], Typed("x", False)),
])
def test_a_message_is_a_line_continued_lines_or_a_multi_block(lines, typed):
    read, prompts = _reader(lines)
    assert read_message(read) == typed
    assert prompts[0] == "> " and all(p == "... " for p in prompts[1:])


def test_end_of_input_inside_a_block_is_end_of_input():
    read, _ = _reader(["!multi", "never ended"])
    with pytest.raises(EOFError):
        read_message(read)


def _group():
    return typer.main.get_command(app)


@pytest.mark.parametrize("word", ["keys", "history", "help", "Login"])
def test_a_word_that_is_a_command_elsewhere_is_asked_about_not_sent(word):
    with pytest.raises(AskFirst) as caught:
        dispatch(_group(), ["-c", "cfg.yaml", word])
    assert caught.value.word == word and caught.value.routed == ["ask", "-c", "cfg.yaml", word]
    assert f"route ask {word}" in str(caught.value)


@pytest.mark.parametrize("args", [["keys", "to", "the", "kingdom"], ["what are api keys?"], ["ask", "keys"],
                                  ["--", "keys"], ["hello"]])
def test_a_sentence_or_a_deliberate_ask_goes_through(args):
    """The legitimate neighbours: the same word within a prompt, or asked for by name."""
    assert dispatch(_group(), args)[0] == "ask"


def test_chat_is_a_command_now_and_a_near_miss_is_refused_as_before():
    assert dispatch(_group(), ["chat", "-C"]) == ["chat", "-C"]
    with pytest.raises(NotAPrompt) as caught:
        dispatch(_group(), ["chta"])
    assert not isinstance(caught.value, AskFirst) and "route chat" in str(caught.value)


def _record(session: str | None, prompt: str, answer: str | None = "ok", *, tier: str | None = "cheap",
            index: int | None = 0, requested: str = "auto", status: str = "ok", source: str = "cli") -> RequestRecord:
    decision = {"session": {"id": session, "tier_index": index}} if session and index is not None else {}
    return RequestRecord(source=source, ts=time.time(), requested=requested, backend="local", status=status,
                         prompt=prompt, answer=answer, tier=tier, session=session, cost_usd=0.25, decision=decision)


def test_a_conversation_is_read_back_in_order_at_the_highest_tier_it_reached(tmp_path):
    store = Store(tmp_path / "route.db")
    store.log([
        _record("chat-a", "first"),
        _record("chat-b", "another conversation"),
        _record("chat-a", "second", tier="strong", index=1),
        _record("chat-a", "pinned", tier=None, requested="local"),
        _record("chat-a", "stopped", None, status="cancelled"),
        _record("chat-a", "third", tier="cheap", index=0),  # a later turn never takes the tier down
        _record(None, "from the server", source="server"),
    ])
    conversation = resume(store, "chat-a")
    assert [m["content"] for m in conversation.messages if m["role"] == "user"] == [
        "first", "second", "pinned", "third"]
    assert conversation.tier == "strong" and conversation.cost_usd == pytest.approx(1.0)
    assert resume(store, None).cid == "chat-a"  # the terminal's last answered request is in it


def test_continue_after_a_one_shot_request_goes_on_from_it(tmp_path):
    store = Store(tmp_path / "route.db")
    store.log([_record("chat-a", "old chat"), _record(None, "one shot", tier="cheap", index=None)])
    conversation = resume(store, None)
    one_shot = store.recent(1)[0]["id"]
    assert conversation.cid == f"log-{one_shot}" and conversation.messages[0]["content"] == "one shot"
    store.log([_record(conversation.cid, "follow-up", index=0)])
    again = resume(store, None)
    assert again.cid == conversation.cid
    assert [m["content"] for m in again.messages if m["role"] == "user"] == ["one shot", "follow-up"]


def test_nothing_to_continue_is_a_plain_usage_error(tmp_path):
    from backends.errors import UsageError

    store = Store(tmp_path / "route.db")
    with pytest.raises(UsageError, match="no conversation to continue"):
        resume(store, None)
    with pytest.raises(UsageError, match="no conversation 'chat-nope'"):
        resume(store, "chat-nope")
    store.log([_record("chat-a", None, None)])
    with pytest.raises(UsageError, match="store_content is false"):
        resume(store, "chat-a")


def test_a_session_the_router_forgot_starts_again_at_the_conversations_tier(tmp_path):
    from router import Router
    from router.cli.conversation import Conversation
    from router.config_loader import load_config
    from tests.helpers import cli_config

    router = Router(load_config(str(cli_config(tmp_path, "http://127.0.0.1:9/v1"))), log=False)
    conversation = Conversation("chat-x", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
                                tier="strong", backend="hosted")
    conversation.recall(router)  # as after sessions.ttl_s without a turn: nothing is known of chat-x
    state = router.session("chat-x").state
    assert state is not None and (state.tier, state.backend, state.calls) == (1, "hosted", 1)
    router.sessions.table.put("chat-x", None, tier=1, backend="local")
    conversation.recall(router)  # a session the router still has is its own to keep
    assert router.session("chat-x").state.backend == "local"
    Conversation("chat-y", tier="gone").recall(router)  # a tier this config does not have: afresh
    assert router.session("chat-y").state is None
