"""A client's template learned from its own traffic (issue 46): what repeats across its tasks is
its harness, what varies is the user's words. policies/template.py's diffing and its
state per API key and client, and a Router that reads a client's third task as it reads the bare
prompt where no general rule could."""

from __future__ import annotations

import pytest

from policies.task import read_task, scored_text
from policies.template import MIN_FIXED, Template, Templates, learn
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


def _request(task: str) -> list[dict]:
    return [SYSTEM, {"role": "user", "content": PREFIX + task + SUFFIX}]


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


def test_a_client_template_is_adopted_at_its_third_task_and_read_like_the_bare_prompt():
    templates = Templates()
    seen = [templates.read(_request(task), None, "key-a") for task in TASKS]
    assert seen[0] is None and (seen[1] is None or seen[1].template is None)
    assert seen[2] is not None and seen[2].template == Template(PREFIX, SUFFIX)
    task = read_task(_request(TASKS[3]), None, learned=seen[3])
    assert scored_text(task) == TASKS[3] and task.set_aside_chars()["template"] == len(PREFIX) + len(SUFFIX)
    # unread, the template is scored as the user's words
    assert scored_text(read_task(_request(TASKS[3]))) != TASKS[3]


def test_templates_are_kept_per_api_key_and_client():
    templates = Templates()
    for task in TASKS[:3]:
        templates.read(_request(task), None, "key-a")
    assert templates.read(_request(TASKS[3]), None, "key-b") is None  # another key: nothing learned yet
    other_agent = [{"role": "system", "content": "You are another agent."}, _request(TASKS[3])[1]]
    assert templates.read(other_agent, None, "key-a") is None  # another client behind the same key


def test_one_conversation_going_on_teaches_nothing():
    templates = Templates()
    conversation = _request(TASKS[0])
    templates.read(conversation, None, "k")
    for follow_up in ("Now run it again with -n, and tell me what changes.", "And once more with -e please."):
        conversation = [*conversation, {"role": "assistant", "content": "Done."}, {"role": "user", "content": follow_up}]
        assert templates.read(conversation, None, "k") is None


def test_the_table_stays_bounded():
    templates = Templates(max_entries=10)
    for i in range(100):
        templates.read([{"role": "system", "content": f"agent {chr(65 + i % 26)}{i // 26}"},
                        {"role": "user", "content": "hi"}], None, f"key-{i}")
    assert len(templates) == 10


@pytest.mark.integration
def test_a_router_reads_a_clients_third_task_as_the_bare_prompt(sim):
    backends = {"local": {"kind": "openai", "model": "m-local", "base_url": sim.base_url, "max_retries": 0},
                "frontier": {"kind": "openai", "model": "m-frontier", "base_url": sim.base_url, "max_retries": 0}}
    config = {"backends": backends, "routing": {"scorer": {"kind": "learned"}, "tiers": [
        {"name": "local", "below": 0.45, "backends": ["local"]}, {"name": "frontier", "backends": ["frontier"]}]}}
    with Router(load_config(config)) as router:
        decisions = [router.explain(_request(task)) for task in TASKS]
        bare = router.explain(TASKS[3])
    assert decisions[3].score is not None and bare.score is not None
    assert decisions[3].score.value == pytest.approx(bare.score.value, abs=1e-12)
    assert decisions[0].score is not None and decisions[0].task is not None
    assert scored_text(decisions[0].task) != TASKS[0]  # the first task: no rule reads this template
