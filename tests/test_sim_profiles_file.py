"""`route sim --profiles FILE`: the replies a profile file scripts (text, or tool calls) are what
the simulator answers, and every model still judges arbiter prompts, so a consortium pointed at
`route sim` gets its verdicts. Before, the judging responder `route sim` gives every model took
precedence over the file's replies, which were never sent."""

from __future__ import annotations

import textwrap

import openai
import pytest

from backends.errors import ConfigError
from backends.simulator import SimServer, load_profiles
from router.config_loader import load_config
from router.core import Router
from router.simulator import sim_profiles

pytestmark = pytest.mark.integration

PROFILES = """\
profiles:
  tool-model:
    replies:
      - content: ""
        tool_calls: [{name: get_weather, arguments: '{"city": "Paris"}'}]
      - "It is sunny in Paris."
  plain-model: {answer_tokens: 5}
"""


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES)
    with SimServer(sim_profiles(str(path))) as sim:
        yield sim


def test_a_profile_files_replies_are_answered_in_turn(served):
    client = openai.OpenAI(base_url=served.base_url, api_key="-", max_retries=0)
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model="tool-model", messages=ask).choices[0]
    assert first.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in first.message.tool_calls] == [
        ("get_weather", '{"city": "Paris"}')]
    second = client.chat.completions.create(model="tool-model", messages=ask).choices[0]
    assert second.message.content == "It is sunny in Paris."
    plain = client.chat.completions.create(model="plain-model", messages=ask).choices[0]
    assert plain.message.content.startswith("[simulated plain-model]")


def test_every_model_still_judges_arbiter_prompts(served):
    def backend(model: str) -> dict:
        return {"kind": "openai", "model": model, "base_url": served.base_url, "max_retries": 0}

    router = Router(load_config({"backends": {"m": backend("plain-model"), "judge": backend("tool-model")},
                                 "routing": {"tiers": [{"name": "all", "backends": ["m"]}]},
                                 "consortia": {"pair": {"members": ["m*2"], "arbiter": "judge", "judging": "rank"}}}))
    arbiter = router.complete("hi", model="pair").completion.metadata["trace"]["rounds"][0]["arbiter"]
    assert arbiter["fallback"] is None and arbiter["verdict"]["ranking"]  # read from a well-formed reply


def test_a_malformed_reply_in_the_file_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent("""\
        profiles:
          m: {replies: [{text: "no such field"}]}
        """))
    with pytest.raises(ConfigError, match="content") as caught:
        load_profiles(path)
    assert str(path) in str(caught.value)
