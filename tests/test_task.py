"""The task read from a conversation (policies/task.py), on request bodies real clients sent
(tests/data/clients) parsed by the server's own dialects: the user's words are scored, the
client's harness is set aside and named, a turn that is only harness still scores (and says
so), and user words in a block that only looks like harness are kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from backends.types import Message
from benchmarks.harness import CORPUS, DIALECTS, SIDE_REQUESTS, wrapper, wrappers
from policies.complexity import ComplexityScorer
from policies.task import HISTORY_KEPT, KINDS, WINDOW, Task, read_task, scored_text

pytestmark = pytest.mark.unit

SCORER = ComplexityScorer.load()
PROMPTS = ("hi", "Prove that sqrt(2) is irrational.",
           "Write a Python function that merges two sorted lists.\n\n```python\ndef merge(a, b):\n    pass\n```",
           " What is the capital of Australia?\nA. Sydney\nB. Canberra\nC. Melbourne\nD. Perth\nAnswer:")


def _parsed(name: str) -> tuple[list[Message], Any]:
    record = json.loads((CORPUS / f"{name}.json").read_text())
    call = DIALECTS[record["path"]].parse(orjson.dumps(record["body"]))
    return call.messages, call.extra.get("tools")


def _score(messages: list[Message]) -> float:
    return SCORER.score(messages).value


def _bare(prompt: str) -> float:
    return _score([{"role": "user", "content": prompt}])


def test_aiders_hi_with_its_format_rules_scores_as_bare_hi():
    messages, _ = _parsed("aider-chat-o4-mini-hi")
    task = read_task(messages)
    assert task.first == task.latest == "hi"
    assert abs(_score(task.messages) - _bare("hi")) < 1e-9
    # what the harness does to it unread: the format rules and the system prompt folded into a user turn
    assert _score(messages) - _bare("hi") > 0.5
    aside = task.set_aside_chars()
    assert aside["format_rules"] > 2000 and aside["system"] > 5000 and aside["files"] > 0
    assert not task.harness_only


@pytest.mark.parametrize("name", ["aider-anthropic-cache-thinking", "aider-chat-gpt-4.1", "aider-anthropic-whole",
                                  "aider-anthropic-ask"])
def test_aiders_examples_files_and_reminders_are_not_the_task(name: str):
    task = read_task(_parsed(name)[0])
    assert task.latest in ("Make greet() say hello instead of hi.",
                           "Why does greet() concatenate strings instead of using an f-string?")
    assert task.first == task.latest  # not the example conversation's "Change get_factorial() ..."
    assert task.messages == [{"role": "user", "content": task.latest}]
    assert "files" in task.set_aside_chars()


@pytest.mark.parametrize(("name", "first", "latest"), [
    ("aider-anthropic-second-turn", "Make greet() say hello instead of hi.",
     "Now also add a docstring to greet() explaining the argument."),
    ("claude-code-second-turn", "Run the shell command 'echo corpus-ok' and tell me what it printed.",
     "Now explain what the echo builtin does with the -n flag."),
    ("codex-responses-second-turn", "Run the shell command 'echo corpus-ok' and tell me what it printed.",
     "Now explain what the echo builtin does with the -n flag."),
])
def test_a_second_turn_reads_the_first_and_the_latest_words(name: str, first: str, latest: str):
    task = read_task(_parsed(name)[0])
    assert (task.first, task.latest) == (first, latest)
    # the scorer sees the conversation: the first task, the model's plain answer, the latest turn
    assert [m["role"] for m in task.messages] == ["user", "assistant", "user"]
    assert task.messages[1]["content"].strip() == "Done: the command printed corpus-ok."


def test_codex_environment_agents_md_and_tool_loop_are_set_aside_and_named():
    messages, tools = _parsed("codex-chat-0.80-tool-round-trip")
    task = read_task(messages, tools)
    assert task.latest == "Run the shell command 'echo corpus-ok' and tell me what it printed."
    explained = task.explain()
    assert set(explained["set_aside"]) == {"system", "tools", "instructions", "environment", "tool_calls", "tool_results"}
    assert explained["set_aside"]["instructions"] == len(messages[1]["content"])  # AGENTS.md, its heading line included
    assert explained["set_aside"]["environment"] == len(messages[2]["content"])
    assert explained["scored_chars"] == len(task.latest) and explained["harness_only"] is False
    assert set(explained["set_aside"]) <= set(KINDS)


def test_claude_codes_reminders_are_set_aside_part_by_part():
    messages, tools = _parsed("claude-code-sonnet-thinking-tool-round-trip")
    task = read_task(messages, tools)
    assert task.latest == "Run the shell command 'echo corpus-ok' and tell me what it printed."
    assert [a.kind for a in task.set_aside if a.kind == "reminder"] == ["reminder"] * 3


RECORDED = [w for w in wrappers()]


@pytest.mark.parametrize("wrap", RECORDED, ids=lambda w: w.name)
def test_each_recorded_clients_wrapped_task_scores_within_002_of_the_bare_task(wrap: Any):
    # what a decision scores (scored_text: the latest words), beside the bare prompt as typed
    dialect = DIALECTS[wrap.path]
    for prompt in PROMPTS:
        call = dialect.parse(wrap.body(prompt))
        task = read_task(call.messages, call.extra.get("tools"))
        bare = SCORER.score_text(prompt.strip())
        assert abs(SCORER.score_text(scored_text(task)) - bare) <= 0.02, f"{wrap.name}: {prompt!r} read as {task.latest!r}"
        assert not task.harness_only


def test_every_recorded_body_but_side_requests_has_a_task_to_wrap():
    names = {w.name for w in RECORDED}
    for fixture in CORPUS.glob("*.json"):
        assert (fixture.stem in names) != (fixture.stem in SIDE_REQUESTS), fixture.stem


# -- a turn that is only harness ---------------------------------------------------------------------


def test_a_turn_that_is_only_a_reminder_is_scored_whole_and_flagged():
    record = json.loads((CORPUS / "claude-code-opus-tool-round-trip.json").read_text())
    body = record["body"]
    body["messages"] = [{**body["messages"][0], "content": body["messages"][0]["content"][:1]}]  # the reminder alone
    call = DIALECTS[record["path"]].parse(orjson.dumps(body))
    task = read_task(call.messages)
    reminder = body["messages"][0]["content"][0]["text"]
    assert task.harness_only
    assert task.latest == task.first == reminder
    assert task.messages == [{"role": "user", "content": reminder}]
    assert abs(_score(task.messages) - _bare(reminder)) < 1e-9
    assert task.explain()["harness_only"] is True
    assert task.describe().startswith(f"scored the latest user turn whole ({len(reminder)} characters)")


def test_a_conversation_of_codex_context_only_scores_its_latest_user_turn_whole():
    messages, _ = _parsed("codex-chat-0.80-tool-round-trip")
    context_only = messages[:3]  # system prompt, AGENTS.md, environment: no words of the user's
    task = read_task(context_only)
    assert task.harness_only and task.latest == messages[2]["content"] and task.first == messages[1]["content"]
    assert _score(task.messages) == _bare(messages[2]["content"])


def test_aider_files_message_alone_is_flagged_not_dropped():
    text = "I have *added these files to the chat* so you can go ahead and edit them.\n\ngreet.py\n```\nx = 1\n```\n"
    task = read_task([{"role": "system", "content": "Act as an expert."}, {"role": "user", "content": text}])
    assert task.harness_only and task.latest == text


def test_an_empty_conversation_reads_as_no_task():
    task = read_task([])
    assert task == Task("", "", [{"role": "user", "content": ""}], False) and task.set_aside == ()


# -- no over-stripping -------------------------------------------------------------------------------


SYSTEM = {"role": "system", "content": "You are a coding agent. Be precise.\n\nReply in English."}


@pytest.mark.parametrize("words", [
    "<system-reminder>\nProve that sqrt(2) is irrational.",  # a known tag never closed
    "Why does Claude Code add <system-reminder>x</system-reminder> to my turns?",  # not whole lines
    "<system-reminder>read this</system-reminder> and prove that sqrt(2) is irrational.",  # words after the close
    "<environment_context>\n  <cwd>/tmp</cwd>\n</environment_context> explain this block, please",
    "<div>\nWhy is this div not centred?\n</div>",  # HTML's elements are what a user pastes
    # Claude Code relays a message the user sent while it worked in a reminder: the user's words
    "<system-reminder>\nThe user sent a new message while you were working:\nAlso handle the empty list.\n</system-reminder>",
])
def test_user_words_in_a_block_that_only_looks_like_harness_are_kept(words: str):
    for messages in ([{"role": "user", "content": words}], [SYSTEM, {"role": "user", "content": words}]):
        task = read_task(messages)
        assert task.latest == words.strip() and not task.harness_only
        assert task.messages[-1]["content"] == words


def test_a_tagged_block_of_any_name_is_context_in_a_clients_request_and_a_turn_of_blocks_is_read_from_its_last():
    """Issue 46: a tag no client here writes is a client's too (an IDE agent's attached file,
    Gemini CLI's <session_context>); when a turn is blocks alone, the last one that holds words
    (an agent's <user_query>) is the user's. Issue 54: only in a client's request (a system
    prompt or tools): a person's bare turn with a pasted document is scored as typed."""
    document = "Summarise the text below.\n\n<document>\nThe sky is blue.\n</document>"
    pasted = read_task([SYSTEM, {"role": "user", "content": document}])
    assert pasted.latest == "Summarise the text below."
    assert pasted.set_aside_chars() == {"system": len(SYSTEM["content"]),
                                        "context": len("<document>\nThe sky is blue.\n</document>")}
    assert read_task([{"role": "user", "content": document}]).latest == document  # the person's own paste
    alone = read_task([SYSTEM, {"role": "user", "content": "<task>\nProve that sqrt(2) is irrational.\n</task>"}])
    assert alone.latest == "Prove that sqrt(2) is irrational." and not alone.harness_only
    ide = read_task([SYSTEM, {"role": "user", "content": "<attached_files>\n<file path=\"a.py\">\nx = 1\n</file>\n"
                                                         "</attached_files>\n<user_query>\nRename x to y.\n</user_query>"}])
    assert ide.latest == "Rename x to y."
    environment = read_task([SYSTEM, {"role": "user", "content": "<env>\ncwd: /home/user\ndate: 2026-12-05\nshell: bash\n</env>"}])
    assert environment.harness_only  # an environment report is never read as the user's words
    known = read_task([{"role": "user", "content": "<turn_aborted>\nstopped\n</turn_aborted>"}])
    assert known.harness_only  # a known client's tag is its own, whoever sends it


@pytest.mark.parametrize(("system", "words"), [
    ("Answer briefly.\n\nBe precise.", "Prove it.\n\nBe precise."),  # shared in fewer than 16 characters
    ("Check that the answer is exact and complete.", "Tell me why the answer is exact and complete."),  # inside a line
    ("Answer in English.", "Translate into French: Answer in English."),
])
def test_a_users_end_like_the_system_prompts_is_kept_when_short_or_inside_a_line(system: str, words: str):
    task = read_task([{"role": "system", "content": system}, {"role": "user", "content": words}])
    assert task.latest == words and task.set_aside_chars() == {"system": len(system)}


def test_a_known_block_is_set_aside_and_the_words_around_it_kept():
    words = "Fix the failing test in parser.py."
    text = f"<system-reminder>\nToday is 2026-12-02.\n</system-reminder>\n\n{words}\n\n<system-reminder>\nBe brief.\n</system-reminder>"
    task = read_task([{"role": "user", "content": text}])
    assert task.latest == words
    assert [a.kind for a in task.set_aside] == ["reminder", "reminder"]


def test_a_system_prompts_end_repeated_after_the_users_words_is_set_aside_from_a_line_start():
    rules = "# Rules\n\nAlways answer with a unified diff.\nNever touch files outside the chat."
    system = {"role": "system", "content": f"You edit code.\n\n{rules}"}
    task = read_task([system, {"role": "user", "content": f"Rename foo to bar.\n\n{rules}\n"}])
    assert task.latest == "Rename foo to bar."
    assert task.set_aside_chars()["format_rules"] == len(rules) + 2  # with the blank line before, the line end after
    # a user turn that is all of it is the client's alone: flagged, scored whole
    alone = read_task([system, {"role": "user", "content": rules}])
    assert alone.harness_only and alone.latest == rules


def test_a_first_user_turn_is_a_folded_system_prompt_only_when_a_later_turn_repeats_its_end():
    long_end = "Answer in JSON with the fields name, reason and confidence, nothing else at all."
    own = [{"role": "user", "content": f"Classify this ticket: printer on fire.\n\n{long_end}"},
           {"role": "assistant", "content": "{}"}, {"role": "user", "content": "And this one: VPN down."}]
    assert read_task(own).first == own[0]["content"]  # no later turn ends like it: the user's
    folded = [{"role": "user", "content": f"You classify tickets.\n\n{long_end}"},
              {"role": "user", "content": f"Printer on fire.\n\n{long_end}"}]
    task = read_task(folded)
    assert task.first == task.latest == "Printer on fire."
    assert task.set_aside[0].kind == "system"


def test_tool_schemas_are_named_with_their_size_only_when_explained():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object", "properties": {}}}}]
    task = read_task([{"role": "user", "content": "Weather in Paris?"}], tools)
    assert task.latest == "Weather in Paris?" and task.set_aside == ()
    assert task.explain()["set_aside"] == {"tools": len(json.dumps(tools, separators=(",", ":")))}
    assert task.describe() == f"scored 17 characters of the user's words; set aside: tools {task.explain()['set_aside']['tools']}"


def test_wrapping_a_prompt_keeps_it_exactly_in_every_recorded_body():
    prompt = " Leading space, \"quotes\" and a\nnew line\tand tab"
    for wrap in RECORDED:
        call = DIALECTS[wrap.path].parse(wrap.body(prompt))
        read = read_task(call.messages, call.extra.get("tools")).messages[-1]["content"].strip('"')
        if wrap.client == "marvin":  # Marvin indents the words in its markup: their own leading blanks are lost there
            read, expected = read.strip(), prompt.strip()
        else:
            expected = prompt
        assert read == expected, wrap.name


def test_the_benchmark_finds_no_task_in_a_body_without_one(tmp_path: Path):
    fixture = tmp_path / "nobody.json"
    fixture.write_text(json.dumps({"path": "/v1/chat/completions",
                                   "body": {"model": "m", "messages": [{"role": "user", "content": "unrelated"}]}}))
    assert wrapper(fixture, loop=False) is None


# -- `route score` on a conversation --------------------------------------------------------------


def test_route_score_scores_a_recorded_conversation_as_its_task_and_says_what_it_set_aside():
    from typer.testing import CliRunner

    from router.cli.app import app

    body = json.loads((CORPUS / "aider-chat-o4-mini-hi.json").read_text())["body"]
    lines = [{"id": "aider", "messages": body["messages"]}, {"id": "bare", "prompt": "hi"},
             {"id": "context", "messages": [{"role": "user", "content": "<turn_aborted>\nstopped\n</turn_aborted>"}]}]
    result = CliRunner().invoke(app, ["score"], input="\n".join(map(json.dumps, lines)) + "\n")
    assert result.exit_code == 0, result.output
    aider, bare, context = (json.loads(line) for line in result.stdout.splitlines())
    assert aider["score"] == bare["score"] == round(_bare("hi"), 6)
    assert aider["set_aside"]["format_rules"] > 2000 and aider["harness_only"] is False and "set_aside" not in bare
    assert context["harness_only"] is True and context["set_aside"] == {"client_note": len(lines[2]["messages"][0]["content"])}


@pytest.mark.parametrize("line", ['{"id": 1, "messages": "hi"}', '{"id": 1, "messages": ["hi"]}', '{"id": 1}'])
def test_route_score_names_a_bad_conversation(line: str):
    from typer.testing import CliRunner

    from router.cli.app import app

    result = CliRunner().invoke(app, ["score"], input=line + "\n")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "record 1" in result.output and "messages" in result.output


# -- long conversations -----------------------------------------------------------------------------


def test_a_long_agent_loop_reads_the_same_task_with_its_context_bounded():
    record = json.loads((CORPUS / "claude-code-second-turn.json").read_text())
    body = record["body"]
    turns: list[dict[str, Any]] = body["messages"]
    loop = turns[2:4]  # the model's tool call and its result
    answer, latest = turns[-2], turns[-1]
    # 300 tool round trips, then 80 more tasks each answered, then the latest turn
    follow_ups = [m for n in range(80) for m in ({"role": "user", "content": f"Next task number {n}."}, answer)]
    body["messages"] = [*turns[:2], *loop * 300, answer, *follow_ups, latest]
    call = DIALECTS[record["path"]].parse(orjson.dumps(body))
    task = read_task(call.messages)
    assert task.first == "Run the shell command 'echo corpus-ok' and tell me what it printed."
    assert task.latest == "Now explain what the echo builtin does with the -n flag."
    assert len(task.messages) == HISTORY_KEPT + 1
    assert task.messages[-2]["role"] == "assistant" and task.messages[-3] == {"role": "user", "content": "Next task number 79."}
    pieces = task.set_aside  # the full pass still accounts for every tool call and result
    assert sum(p.kind == "tool_calls" for p in pieces) == 300 and sum(p.kind == "tool_results" for p in pieces) == 300


def test_context_before_the_latest_turn_is_looked_for_within_a_window():
    words: list[Message] = [{"role": "user", "content": "Refactor the parser."}, {"role": "assistant", "content": "Done."}]
    calls: list[Message] = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                                                                   "function": {"name": "sh", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "c", "content": "ok"}]
    task = read_task([*words, *calls * WINDOW, {"role": "user", "content": "Now add tests."}])
    assert task.first == "Refactor the parser." and task.latest == "Now add tests."
    assert task.messages == [{"role": "user", "content": "Now add tests."}]  # the first turn lies beyond the window
    near = read_task([*words, *calls * 3, {"role": "user", "content": "Now add tests."}])
    assert near.messages == [*words, {"role": "user", "content": "Now add tests."}]
