"""A client's template learned from its own traffic (issues 46 and 54): what repeats across its tasks
is its harness, what varies is the user's words. policies/template.py's diffing and its state per
API key and app: read when deciding, learned after the answer; a person's bare prompt never teaches
nor is read by one; one key's apps never displace another key's; and a Router that reads a client's
third task as it reads the bare prompt where no general rule could."""

from __future__ import annotations

from typing import Any

import pytest

from backends.types import Message
from policies.task import Task, read_task, scored_text
from policies.template import KEPT, MIN_FIXED, Template, Templates, learn
from router import Router
from router.config_loader import load_config

pytestmark = pytest.mark.unit

# A short template no general rule of policies/wrappers.py reads: a heading line and a line of
# format rules, far from a page of them.
PREFIX = "### Task from the ticket queue\n"
SUFFIX = "\n### Reply with JSON: {\"answer\": ..., \"confidence\": 0-1}. Cite the ticket number."
TASKS = ["Run the shell command 'echo ok' and report what it printed.",
         "Run the test suite and list the failures.",
         "Prove that the sum of two odd integers is even.",
         "Summarise the design document in three bullet points."]
SYSTEM = {"role": "system", "content": "You are a ticket bot. Today is 2026-12-05."}


def _request(task: str, system: Message = SYSTEM) -> list[Message]:
    return [system, {"role": "user", "content": PREFIX + task + SUFFIX}]


def _answered(templates: Templates, messages: list[Message], owner: str | None, tools: Any = None) -> Task:
    """One request as the router takes it: read with what the client taught so far, then, once
    answered, learned from."""
    client = templates.client(messages, tools, owner)
    task = read_task(messages, tools, learned=templates.lookup(client))
    sample = templates.sample(client, messages, task.words)
    if sample is not None:
        templates.learn(sample)
    return task


def test_two_tasks_teach_the_fixed_parts_cut_where_a_line_or_a_label_ends():
    template = learn(PREFIX + TASKS[0] + SUFFIX, PREFIX + TASKS[1] + SUFFIX)
    # both tasks open with "Run the ": the user's words, kept out of the template
    assert template == Template(PREFIX, SUFFIX)
    assert template.words(PREFIX + TASKS[2] + SUFFIX) == TASKS[2]
    assert template.words(TASKS[2]) is None  # a turn that does not fit is not cut
    labelled = learn("Please solve this issue: Run the tests.\n\nRules: be brief, use bash, cite files.",
                     "Please solve this issue: Run the linter.\n\nRules: be brief, use bash, cite files.")
    assert labelled is not None and labelled.prefix == "Please solve this issue: "


def test_nothing_is_learned_from_one_turn_or_from_chance_likeness():
    assert learn(PREFIX + TASKS[0] + SUFFIX, PREFIX + TASKS[0] + SUFFIX) is None  # nothing varies
    assert learn("What is 2 + 2?", "What is the capital of Peru?") is None  # shorter than MIN_FIXED
    assert len("What is ") < MIN_FIXED


def test_a_client_template_is_read_on_its_third_task_and_read_like_the_bare_prompt():
    templates = Templates()
    read = [_answered(templates, _request(task), "key-a") for task in TASKS]
    assert [scored_text(t) == task for t, task in zip(read, TASKS)] == [False, False, True, True]
    assert read[3].set_aside_chars()["learned"] == len(PREFIX) + len(SUFFIX)
    assert "learned: what this client's earlier answered tasks repeat" in read[3].describe()
    # unread, the template is scored as the user's words
    assert scored_text(read_task(_request(TASKS[3]))) != TASKS[3]


def test_a_persons_bare_prompt_never_teaches_a_template_nor_is_read_by_one():
    """Issue 54: eight requests from one key, no system prompt, no tools, each the same instruction
    and a question: the instruction is the user's, on every one of them."""
    templates = Templates()
    prefix = ("Give a rigorous, step-by-step mathematical proof, then an optimized Python implementation with unit "
              "tests, for the following: ")
    questions = ["the sum of the first n odd numbers is n squared", "there are infinitely many primes",
                 "every tree with n nodes has n - 1 edges", "sqrt(2) is irrational", "a graph is bipartite iff it "
                 "has no odd cycle", "the harmonic series diverges", "gcd(a, b) divides a - b", "2^n > n for n >= 1"]
    for question in questions:
        bare = [{"role": "user", "content": prefix + question}]
        assert scored_text(_answered(templates, bare, "key-a")) == prefix + question
    assert len(templates) == 0


def test_templates_are_kept_per_api_key_and_app():
    templates = Templates()
    for task in TASKS[:3]:
        _answered(templates, _request(task), "key-a")
    assert scored_text(_answered(templates, _request(TASKS[3]), "key-b")) != TASKS[3]  # another key: nothing yet
    other_app = {"role": "system", "content": "You are another agent."}
    assert scored_text(_answered(templates, _request(TASKS[3], other_app), "key-a")) != TASKS[3]  # another app
    assert scored_text(_answered(templates, _request(TASKS[3]), "key-a")) == TASKS[3]  # its own: learned


def test_deciding_reads_and_only_an_answer_teaches():
    templates = Templates()
    client = templates.client(_request(TASKS[0]), None, "k")
    for task in TASKS:
        read_task(_request(task), learned=templates.lookup(client))  # decided, never answered
    assert templates.lookup(client) is None and len(templates) == 0


def test_one_conversation_going_on_teaches_nothing():
    templates = Templates()
    conversation = _request(TASKS[0])
    _answered(templates, conversation, "k")
    for follow_up in ("Now run it again with -n, and tell me what changes.", "And once more with -e please."):
        conversation = [*conversation, {"role": "assistant", "content": "Done."}, {"role": "user", "content": follow_up}]
        _answered(templates, conversation, "k")
    assert templates.lookup(templates.client(conversation, None, "k")) is None


def test_the_structure_is_read_around_a_learned_template():
    """Issue 54: once a template is adopted, a changing block the client writes before the task
    (Copilot CLI's <current_datetime>) is still the client's, not the user's words."""
    templates = Templates()
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]

    def turn(task: str, minute: int) -> list[Message]:
        when = f"<current_datetime>\n2026-12-07T10:{minute:02d}:00Z\n</current_datetime>\n"
        return [SYSTEM, {"role": "user", "content": when + PREFIX + task + SUFFIX}]

    read = [_answered(templates, turn(task, n), "k", tools) for n, task in enumerate(TASKS)]
    assert scored_text(read[3]) == TASKS[3]
    assert {"context", "learned"} <= set(read[3].set_aside_chars())


def test_a_users_own_instruction_after_a_learned_template_is_kept():
    templates = Templates()
    for task in TASKS[:3]:
        _answered(templates, _request(task), "k")
    own = "Before anything else: explain the proof twice, once for a child and once for a referee."
    assert scored_text(_answered(templates, _request(f"{own}\n{TASKS[2]}"), "k")) == f"{own}\n{TASKS[2]}"


def test_the_table_stays_bounded_and_one_keys_apps_never_displace_another_keys():
    templates = Templates(max_entries=100, per_key=8)
    for task in TASKS[:3]:
        _answered(templates, _request(task), "steady")
    for i in range(1_100):  # one key with a flood of apps
        _answered(templates, [{"role": "system", "content": f"agent {i}"}, {"role": "user", "content": "hi"}], "flood")
    assert len(templates) <= 100
    assert scored_text(_answered(templates, _request(TASKS[3]), "steady")) == TASKS[3]


def test_a_huge_turn_is_kept_by_its_ends_only():
    templates = Templates()
    huge = "x " * 500_000
    _answered(templates, _request(huge), "k")
    (client,) = templates._clients.values()
    assert len(client.words) <= 2 * KEPT


@pytest.mark.integration
def test_a_router_reads_a_clients_third_answered_task_as_the_bare_prompt_and_explain_teaches_nothing(sim):
    backends = {"local": {"kind": "openai", "model": "m-local", "base_url": sim.base_url, "max_retries": 0},
                "frontier": {"kind": "openai", "model": "m-frontier", "base_url": sim.base_url, "max_retries": 0}}
    config = {"backends": backends, "routing": {"scorer": {"kind": "learned"}, "tiers": [
        {"name": "local", "below": 0.45, "backends": ["local"]}, {"name": "frontier", "backends": ["frontier"]}]},
        "log": {"enabled": False}}
    with Router(load_config(config)) as router:
        first = router.explain(_request(TASKS[3]))
        for _ in range(5):
            for task in TASKS[:3]:
                router.explain(_request(task))  # explained, never answered: nothing learned
        again = router.explain(_request(TASKS[3]))
        assert first.score is not None and again.score is not None and again.score.value == first.score.value
        for task in TASKS[:3]:
            router.complete(_request(task))
        decided = router.explain(_request(TASKS[3]))
        bare = router.explain(TASKS[3])
    assert decided.score is not None and bare.score is not None
    assert decided.score.value == pytest.approx(bare.score.value, abs=1e-12)
    assert first.task is not None and scored_text(first.task) != TASKS[3]  # unlearned: no rule reads this template
