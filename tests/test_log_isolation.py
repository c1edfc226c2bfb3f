"""The request log keeps every good record whatever else happens: a record that cannot be built
is refused alone, a row SQLite refuses is left out of its batch alone; a complete tool-call-only
stream is logged `ok`; stored content is bounded; a zero flush interval writes before returning."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.store import RequestRecord, Store
from router.store.request_log import RequestLog
from tests.helpers import TOOLS, ok_outcome, tool_upstream

pytestmark = pytest.mark.unit


def test_a_bad_record_among_concurrent_good_ones_costs_no_good_one(tmp_path):
    """The issue's case: one `content: 42` among ~1,500 requests dropped a whole batch (196
    acknowledged requests). Now it is refused alone, when it is observed."""
    log = RequestLog(tmp_path / "log.db")

    def client(worker: int) -> None:
        for i in range(200):
            log.observe(ok_outcome(f"{worker}:{i}"))
            if i % 50 == 25:
                log.observe(ok_outcome(42))  # last_user_text raises TypeError on this

    threads = [threading.Thread(target=client, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert log.flush()
    rows = Store(tmp_path / "log.db").recent(10_000)
    assert {r["prompt"] for r in rows} == {f"{w}:{i}" for w in range(8) for i in range(200)}
    assert log.dropped == 8 * 4


def test_a_row_sqlite_refuses_is_left_out_of_its_batch_alone(tmp_path):
    store = Store(tmp_path / "s.db")
    good = [RequestRecord(source="api", status="ok", prompt=f"p{i}") for i in range(5)]
    bad = RequestRecord(source="api", status="ok", output_tokens=2**70)  # beyond SQLite's 64-bit integers
    failed = store.log([*good[:2], bad, *good[2:]])
    assert [i for i, _ in failed] == [2] and "64-bit" in str(failed[0][1])
    assert sorted(r["prompt"] for r in store.recent(10)) == [f"p{i}" for i in range(5)]


def test_odd_strings_are_stored_not_dropped(tmp_path):
    log = RequestLog(tmp_path / "log.db")
    log.observe(ok_outcome("lone surrogate \ud800 here"))
    assert log.flush() and log.dropped == 0
    assert Store(tmp_path / "log.db").recent(1)[0]["prompt"].startswith("lone surrogate ")


def test_stored_content_is_bounded_with_a_marker_and_the_original_size(tmp_path):
    log = RequestLog(tmp_path / "log.db", max_content_chars=1000)
    log.observe(ok_outcome("x" * 1_000_000))
    assert log.flush()
    prompt = Store(tmp_path / "log.db").recent(1)[0]["prompt"]
    assert prompt.startswith("x" * 1000) and len(prompt) < 1200
    assert "truncated by route: 1,000,000 characters in all, the first 1,000 kept" in prompt


@pytest.mark.integration
def test_the_content_bound_and_the_interval_come_from_the_config(sim, tmp_path):
    config = {"backends": {"fast": {"kind": "openai", "model": "m-fast", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["fast"]}]},
              "log": {"path": str(tmp_path / "c.db"), "max_content_chars": 10, "flush_interval_ms": 0}}
    with Router(load_config(config)) as router:
        router.complete("a prompt longer than ten characters")
        # Synchronous: the record is on disk when the call returns, without a flush.
        row = Store(tmp_path / "c.db").recent(1)[0]
    assert row["prompt"].startswith("a prompt l\n[… truncated by route: 35 characters")


def test_a_zero_interval_writes_before_observe_returns(tmp_path):
    log = RequestLog(tmp_path / "sync.db", flush_interval_s=0)
    store = Store(tmp_path / "sync.db")
    for i in range(20):
        log.observe(ok_outcome(f"p{i}"))
        assert store.count() == i + 1


@pytest.fixture
def upstream():
    with tool_upstream() as app:
        yield app


@pytest.mark.integration
def test_a_complete_tool_call_only_stream_is_logged_ok(upstream, tmp_path):
    """OpenCode's first turn whenever it uses a tool: the stream is one tool call and [DONE].
    On main it was logged `cancelled` ("the client went away") though the client got it all."""
    config = {"backends": {"tooly": {"kind": "openai", "model": "tool-model", "base_url": upstream.base_url,
                                     "max_retries": 0}},
              "routing": {"tiers": [{"name": "only", "backends": ["tooly"]}]},
              "log": {"path": str(tmp_path / "tools.db")}}
    router = Router(load_config(config), source="server")
    with RouteServer(router) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="-", max_retries=0)
        chunks = list(client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "time?"}],
                                                     tools=TOOLS, stream=True))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert router.request_log.flush()
    row = Store(tmp_path / "tools.db").recent(1)[0]
    assert row["status"] == "ok", row
    assert row["error"] is None


@pytest.mark.integration
@pytest.mark.parametrize("path, body", [
    ("/messages", {"model": "auto", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "time?"}],
                   "tools": [{"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]}),
    ("/responses", {"model": "auto", "stream": True, "input": "time?",
                    "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}]}),
])
def test_a_tool_call_only_stream_is_logged_ok_on_every_protocol(upstream, tmp_path, path, body):
    config = {"backends": {"tooly": {"kind": "openai", "model": "tool-model", "base_url": upstream.base_url,
                                     "max_retries": 0}},
              "routing": {"tiers": [{"name": "only", "backends": ["tooly"]}]},
              "log": {"path": str(tmp_path / "tools.db")}}
    router = Router(load_config(config), source="server")
    with RouteServer(router) as srv:
        reply = httpx.post(srv.base_url + path, json=body, timeout=30)
        assert reply.status_code == 200 and "get_time" in reply.text
    assert router.request_log.flush()
    row = Store(tmp_path / "tools.db").recent(1)[0]
    assert row["status"] == "ok", row
