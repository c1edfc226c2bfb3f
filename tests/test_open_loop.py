"""benchmarks/open_loop.py reads whole responses, plain and chunked (streams), over real HTTP."""

from __future__ import annotations

import json

import pytest

from benchmarks.open_loop import OpenLoop, percentile

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("stream", [False, True])
async def test_every_request_is_answered_and_read_to_its_end(sim, stream):
    body = json.dumps({"model": "sim-model", "max_tokens": 8, "stream": stream,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    loop = OpenLoop(f"{sim.base_url}/chat/completions", body, {})
    result = await loop.run(rate=40.0, duration_s=0.25)
    assert (result["sent"], result["ok"], result["errors"]) == (10, 10, 0)
    assert 1 <= len(loop.idle) <= 10  # every connection went back for reuse, each response read to its end


async def test_error_statuses_are_counted_not_timed(sim):
    sim.set_faults("sim-model", ["500"] * 4)
    body = json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
    result = await OpenLoop(f"{sim.base_url}/chat/completions", body, {}).run(rate=40.0, duration_s=0.1)
    assert (result["sent"], result["ok"], result["errors"]) == (4, 0, 4)


def test_percentile_interpolates():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
