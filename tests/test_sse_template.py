"""A read of many plain content events is read from their strings alone (backends/sse_template.py):
it must come out exactly as parsing every event whole does, whatever the strings hold, and
anything that is not the template around one string must still be parsed (and named) whole."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.assembly import Fold
from backends.base import BackendSettings
from backends.errors import MalformedResponse
from backends.openai_http import OpenAIBackend, _plain_content
from backends.sse_template import template_runs

pytestmark = pytest.mark.unit

PREFIX = b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":'
SUFFIX = b'},"logprobs":null,"finish_reason":null}]}'


def piece(text: str) -> bytes:
    return PREFIX + orjson.dumps(text) + SUFFIX


BACKEND = OpenAIBackend(BackendSettings(name="b", model="m", base_url="http://127.0.0.1:9/v1"))


def whole(batch: list[bytes]) -> list[tuple]:
    """What the deltas say, read by parsing every event (the path the template must equal)."""
    fold = Fold(False)
    BACKEND._fold_events(fold, batch)
    return [(d.text, d.reasoning, d.tool_calls, d.finish_reason, d.usage) for d in fold.done()]


def templated(batch: list[bytes]) -> list[tuple]:
    return [(d.text, d.reasoning, d.tool_calls, d.finish_reason, d.usage) for d in BACKEND._deltas(batch, False)]


OTHERS = [
    b'{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
    b'{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]}',
    b'{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}',
    b'{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    b'{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}',
    piece("x")[:-1] + b',"usage":{"prompt_tokens":1,"completion_tokens":2}}',
]


# A read: runs of plain pieces (what the template reads) between the events it must not.
READS = st.lists(st.one_of(st.lists(st.text().map(piece), max_size=30), st.sampled_from(OTHERS).map(lambda e: [e])),
                 max_size=8).map(lambda runs: [event for run in runs for event in run])


@settings(max_examples=300, deadline=None)
@given(READS)
def test_a_read_comes_out_as_parsing_every_event_does(batch):
    assert templated(batch) == whole(batch)


def test_a_long_run_is_read_from_its_strings():
    texts = ["plain", ' "quoted" ', "back\\slash", "\u00e9\u4e2d\U0001f600", "\n\t", "", "\\x", '"', "x" * 300]
    batch = [OTHERS[0], *(piece(t) for t in texts * 3), OTHERS[3]]
    parts = list(template_runs(batch, b'"content":', _plain_content))
    assert [type(part) for part in parts] == [list, str, list]  # the role chunk, the run, the finish
    assert templated(batch) == whole(batch)
    assert templated(batch)[0][0] == "".join(texts * 3)
    # A string ending in a backslash could have escaped the template's quote: its run is parsed whole.
    ending = [*batch[:5], piece("ends in \\"), *batch[5:]]
    assert all(isinstance(part, list) for part in template_runs(ending, b'"content":', _plain_content))
    assert templated(ending) == whole(ending)


def test_key_order_and_spacing_are_the_providers_own():
    spaced = [b'{ "choices" : [ { "delta" : { "content" : ' + orjson.dumps(f"t{i}") + b' } , "index" : 0 } ] , "id" : "a" }'
              for i in range(20)]
    assert templated(spaced) == whole(spaced) == [("".join(f"t{i}" for i in range(20)), "", [], None, None)]


def test_middles_that_are_not_one_string_are_parsed_whole():
    run = [piece(f"t{i}") for i in range(20)]
    # Two events whose middles only make strings together: the first is malformed, and named.
    sneaky = [*run[:10], PREFIX + b'"ab\\"' + SUFFIX, PREFIX + b'",","d"' + SUFFIX, *run[10:]]
    with pytest.raises(MalformedResponse):
        templated(sneaky)
    with pytest.raises(MalformedResponse):
        templated([*run[:10], PREFIX + b'"a", "b"' + SUFFIX, *run[10:]])
    empty = [*run[:10], PREFIX + b"null" + SUFFIX, *run[10:]]
    assert templated(empty) == whole(empty)  # null is no text: parsed whole, as before
