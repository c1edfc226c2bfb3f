"""Evidence before setting anything aside (issue 54): the general rules for clients nobody recorded
(policies/wrappers.py) run only where the request shows a client, and a person's own text in the
same shapes -- a spec with headings and lists, a labelled problem with rules after it, a pasted
file, a label line over code -- is scored as typed. Each rule beside the user's text it must
leave alone."""

from __future__ import annotations

import pytest

from policies.task import read_task, scored_text
from policies.wrappers import context_like, follow_up, quoted_task
from tests.user_texts import PROBLEM, SPEC

pytestmark = pytest.mark.unit

SYSTEM = {"role": "system", "content": "You are a helpful coding assistant."}
@pytest.mark.parametrize("text", [SPEC, PROBLEM,
                                  "Please solve this issue: Rename cnt to count.\n\n## Rules\n\n- be brief\n- use bash\n"
                                  "- one command per reply\n" * 20])
def test_a_users_own_spec_or_labelled_problem_with_rules_after_it_is_scored_whole(text: str):
    for messages in ([{"role": "user", "content": text}], [SYSTEM, {"role": "user", "content": text}]):
        task = read_task(messages)
        assert scored_text(task) == text.strip(), messages[0]["role"]
        assert "template" not in task.set_aside_chars()


def test_a_known_clients_template_is_read_on_its_first_request_and_only_its_own():
    rules = "You can execute bash commands and edit files to implement the necessary changes.\n\n## Workflow\n..."
    mini = read_task([SYSTEM, {"role": "user", "content": f"Please solve this issue: Rename cnt to count.\n\n{rules}"}])
    assert scored_text(mini) == "Rename cnt to count." and "template" in mini.set_aside_chars()
    other_rules = read_task([SYSTEM, {"role": "user", "content": "Please solve this issue: Rename cnt to count.\n\n"
                                                                   "You may use any tool you like."}])
    assert scored_text(other_rules).startswith("Please solve this issue:")  # not the known rules: the user's


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "src/app.py\n```python\nx = 1\n```\n\nWhy is x one?"}],
    [SYSTEM, {"role": "user", "content": "src/app.py\n```python\nx = 1\n```\n\nWhy is x one?"}],
    [{"role": "user", "content": "Here is my main.py:\n```python\nprint(1)\n```\nWhy does this print one?"}],
])
def test_a_pasted_file_is_the_users_whoever_sends_it(messages: list):
    assert scored_text(read_task(messages)) == messages[-1]["content"].strip()


def test_a_quoted_task_with_an_environment_after_it_is_read_only_in_a_clients_request():
    text = '"Add a --verbose flag."\n\nCurrent time: 2026-12-05T10:21:50Z\nWorking directory: /home/user/project'
    start, end = quoted_task(text)  # type: ignore[misc]
    assert text[start:end] == "Add a --verbose flag."
    assert scored_text(read_task([SYSTEM, {"role": "user", "content": text}])) == "Add a --verbose flag."
    assert scored_text(read_task([{"role": "user", "content": text}])) == text  # a person's bare turn: as typed
    assert quoted_task('"To be or not to be" -- who wrote it, and in which act?') is None


def test_an_environment_report_is_context_and_a_users_paragraph_is_not():
    assert context_like("Today's date: 2026-12-05\nOperating system: linux\nWorking directory: /home/user\n"
                        "/home/user/\n\u2514\u2500\u2500 main.py")
    assert not context_like("My code fails on Mondays.\nIt works on other days.\nWhy would the date matter?")


def test_a_tools_output_is_read_only_under_a_label_the_request_declares():
    observation = "Observation: collected 3 items\ntests/test_a.py ..F\n1 failed, 2 passed\n\nWhy did the third test fail?"
    at = follow_up(observation, lambda label: label == "Observation:")
    assert at is not None and observation[at:] == "Why did the third test fail?"
    assert follow_up(observation, lambda label: False) is None  # nobody declared it
    output = "Observation: collected 3 items\ntests/test_a.py ...\n3 passed"
    assert follow_up(output, lambda label: True) == len(output)  # output alone: no words of the user's
    assert follow_up("Solve for t: $3^t = 27$.", lambda label: label == "Observation:") is None  # the user's label


def test_a_declared_output_label_after_an_answer_is_the_clients_and_a_users_own_label_is_not():
    react = {"role": "system", "content": "Use this format:\nThought: what to do\nAction: a tool\n"
                                          "Observation: the result of the action\n"}
    turn = "Observation: collected 3 items\ntests/test_a.py ..F\n1 failed, 2 passed\n\nWhy did the third test fail?"
    after = read_task([react, {"role": "user", "content": "Run the tests."},
                       {"role": "assistant", "content": "Action: bash"}, {"role": "user", "content": turn}])
    assert scored_text(after) == "Why did the third test fail?" and "tool_results" in after.set_aside_chars()
    # issue 54: at the terminal (`route chat`: no system prompt), pasted code under a label line of
    # the user's own hides nothing
    attempt = ("Here is my attempt:\nfor i in range(n):\n    for j in range(i):\n        total += a[i] * a[j]\n\n"
               "Why is this quadratic, and how do I get it to O(n log n) while keeping exact integer arithmetic?")
    chat = read_task([{"role": "user", "content": "Help me speed up a pair sum."},
                      {"role": "assistant", "content": "Sure, show me the code."}, {"role": "user", "content": attempt}])
    assert scored_text(chat) == attempt
    assert scored_text(read_task([react, {"role": "user", "content": "Help me."}, {"role": "assistant", "content": "ok"},
                                  {"role": "user", "content": attempt}])) == attempt  # a label nobody declared


def test_a_users_labelled_question_or_own_list_is_kept():
    for text in ("Question: which planet is largest?\nA. Mars\nB. Jupiter\nC. Venus\nD. Earth\nAnswer:",
                 "Write an essay on the causes of the First World War.\n\n" + "- cover the alliances\n"
                 "- cover the arms race\n- cover nationalism\n" * 3):
        assert scored_text(read_task([{"role": "user", "content": text}])) == text.strip()
