"""The general rules for clients nobody recorded (policies/wrappers.py, issue 46), each beside the
user's own text it must leave alone: a labelled question, a pasted snippet with no file named, a
quotation, a long question that ends in a list, a follow-up that opens with a label."""

from __future__ import annotations

import pytest

from policies.task import read_task, scored_text
from policies.wrappers import context_like, follow_up, quoted_task, rules_after, without_files

pytestmark = pytest.mark.unit

RULES = ("You can run shell commands.\n\n## Rules\n\n- One command per reply.\n- Never run an editor.\n"
         "- Keep output short.\n\n## Format\n\nReasoning first, then the command in a fenced block. " * 4)


def test_a_template_is_a_label_before_the_task_and_a_page_of_rules_after_it():
    text = f"Please solve this issue: Rename cnt to count.\n\n{RULES}"
    start, end = rules_after(text)  # type: ignore[misc]
    assert text[start:end] == "Rename cnt to count."
    alone = f"Rename cnt to count.\n\n# Instructions\n\n{RULES * 3}"  # unlabelled: kilobytes of rules
    start, end = rules_after(alone)  # type: ignore[misc]
    assert alone[start:end] == "Rename cnt to count."


@pytest.mark.parametrize("text", [
    "Question: which planet is largest?\nA. Mars\nB. Jupiter\nC. Venus\nD. Earth\nAnswer:",
    "Write an essay on the causes of the First World War.\n\n" + "- cover the alliances\n- cover the arms race\n"
    "- cover nationalism\n" * 3,  # a user's own list after the task: short, and not a page of rules
])
def test_a_users_labelled_question_or_own_list_is_not_a_template(text: str):
    assert rules_after(text) is None
    assert scored_text(read_task([{"role": "user", "content": text}])) == text.strip()


def test_a_pasted_file_is_set_aside_and_a_snippet_with_no_file_named_is_kept():
    pasted = "src/app.py\n```python\nx = 1\n```\n\nWhy is x one?"
    assert without_files(pasted) == ("Why is x one?", len("src/app.py\n```python\nx = 1\n```\n"))
    own = "Why does this print one?\n\n```python\nprint(1)\n```"
    assert without_files(own) == (own, 0)


def test_a_quoted_task_with_an_environment_after_it_and_a_quotation_without_one():
    text = '"Add a --verbose flag."\n\nCurrent time: 2026-12-05T10:21:50Z\nWorking directory: /home/user/project'
    start, end = quoted_task(text)  # type: ignore[misc]
    assert text[start:end] == "Add a --verbose flag."
    quotation = '"To be or not to be" -- who wrote it, and in which act?'
    assert quoted_task(quotation) is None


def test_an_environment_report_is_context_and_a_users_paragraph_is_not():
    assert context_like("Today's date: 2026-12-05\nOperating system: linux\nWorking directory: /home/user\n"
                        "/home/user/\n\u2514\u2500\u2500 main.py")
    assert not context_like("My code fails on Mondays.\nIt works on other days.\nWhy would the date matter?")


def test_a_follow_up_after_a_tools_output_and_a_labelled_turn_of_a_person():
    observation = "Observation: collected 3 items\ntests/test_a.py ..F\n1 failed, 2 passed\n\nWhy did the third test fail?"
    at = follow_up(observation)
    assert at is not None and observation[at:] == "Why did the third test fail?"
    assert follow_up("Observation: collected 3 items\ntests/test_a.py ...\n3 passed") == len(
        "Observation: collected 3 items\ntests/test_a.py ...\n3 passed")  # output alone: no words of the user's
    assert follow_up("Solve for t: $3^t = 27$.") is None  # a person's text under a label
    assert follow_up("In adolescence:\n\nA. Brain growth is fastest\nB. Bone mass peaks\nAnswer:") is None


def test_the_follow_up_rule_reads_only_a_turn_after_the_models():
    text = "Note: collected 3 items\ntests/test_a.py ..F\n1 failed\n\nWhy did it fail?"
    assert scored_text(read_task([{"role": "user", "content": text}])) == text  # a first turn: the user's whole
    after = read_task([{"role": "user", "content": "Run the tests."}, {"role": "assistant", "content": "pytest -q"},
                       {"role": "user", "content": text}])
    assert scored_text(after) == "Why did it fail?" and "tool_results" in after.set_aside_chars()
