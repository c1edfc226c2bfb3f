"""The request log: one record per routed request from the Python API (and so the CLI and
server), written off the caller's thread; content optional; never a key."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import time

import pytest

from backends.errors import AllBackendsFailed, BackendUnavailable
from backends.types import Completion, Timings, Usage
from router.config_loader import load_config
from router.core import Router
from router.decision import Decision, Outcome, RouteResult
from router.request_log import RequestLog, record_from
from router.store import Store, default_store_path


def _config(sim, **top):
    return {
        "backends": {"fast": {"kind": "openai", "model": "m-fast", "base_url": sim.base_url, "max_retries": 0,
                              "price": {"input": 1.0, "output": 2.0}, "api_key": "${ROUTE_TEST_KEY}"}},
        "routing": {"tiers": [{"name": "only", "backends": ["fast"]}]},
        **top,
    }


SECRET = "sk-test-do-not-store-0123456789abcdef"


def test_api_requests_are_logged_with_decision_usage_and_content_but_never_the_key(sim, monkeypatch):
    monkeypatch.setenv("ROUTE_TEST_KEY", SECRET)
    sim.script("m-fast", ["the answer is 4"])
    with Router(load_config(_config(sim))) as router:
        result = router.complete("what is 2+2?")
        list(router.stream([{"role": "system", "content": "terse"}, {"role": "user", "content": "and 3+3?"}]))
        assert router.request_log.flush()
    path = default_store_path()
    rows = Store(path).recent(10)
    assert len(rows) == 2
    streamed, plain = rows
    assert plain["source"] == "api" and plain["status"] == "ok" and plain["backend"] == "fast"
    assert plain["requested"] == "auto" and plain["tier"] == "only"
    assert plain["decision"]["chosen"] == "fast" and "reason" in plain["decision"]
    assert plain["prompt"] == "what is 2+2?" and plain["answer"] == result.text == "the answer is 4"
    assert plain["output_tokens"] == result.completion.usage.output_tokens > 0
    assert plain["cost_usd"] == pytest.approx(result.completion.cost_usd)
    assert plain["simulated"] is True
    assert streamed["prompt"] == "and 3+3?" and streamed["ttft_s"] is not None
    for file in path.parent.iterdir():  # the database, its WAL and shared-memory files
        assert SECRET.encode() not in file.read_bytes()


def test_failures_are_logged_with_the_failing_backend(sim):
    sim.set_faults("m-fast", ["500"])
    config = _config(sim)
    del config["backends"]["fast"]["api_key"]
    with Router(load_config(config)) as router:
        with pytest.raises(AllBackendsFailed):
            router.complete("hello")
        router.request_log.flush()
    [row] = Store().recent(5)
    assert row["status"] == "error" and row["backend"] == "fast"
    assert row["error_type"] == "AllBackendsFailed" and "500" in row["error"]
    assert row["decision"]["failures"] == [{"backend": "fast", "error": "BackendUnavailable"}]


def test_logging_can_be_switched_off_by_config_or_argument_and_content_dropped(sim):
    config = _config(sim, log={"enabled": False})
    del config["backends"]["fast"]["api_key"]
    assert Router(load_config(config)).request_log is None
    config["log"] = {"enabled": True}
    assert Router(load_config(config), log=False).request_log is None
    config["log"] = {"store_content": False}
    with Router(load_config(config)) as router:
        router.complete("a private prompt")
        router.request_log.flush()
    [row] = Store().recent(5)
    assert row["prompt"] is None and row["answer"] is None and row["output_tokens"] > 0
    assert "private" not in default_store_path().read_bytes().decode("latin-1")


def test_log_path_comes_from_config(sim, tmp_path):
    target = tmp_path / "elsewhere" / "log.db"
    config = _config(sim, log={"path": str(target)})
    del config["backends"]["fast"]["api_key"]
    with Router(load_config(config)) as router:
        router.complete("hi")
        router.request_log.flush()
    assert Store(target).count() == 1
    assert not default_store_path().exists()


def _decision() -> Decision:
    return Decision(candidates=("a", "b"), reason="test", tier="low")


def test_record_from_maps_success_error_and_cancellation():
    completion = Completion(text="hi", backend="a", model="m", usage=Usage(3, 5), timings=Timings(0.1, 0.4, 20.0),
                            cost_usd=0.01, metadata={"trace": {"id": "t-1"}, "simulated": True})
    ok = record_from(Outcome(_decision(), [{"role": "user", "content": "q"}], "cli", 0.5,
                             result=RouteResult(completion, _decision(), (BackendUnavailable("x", backend="b"),))),
                     ended_at=1000.0)
    assert (ok.status, ok.backend, ok.trace_id, ok.ts, ok.ttft_s, ok.total_s) == ("ok", "a", "t-1", 999.5, 0.1, 0.4)
    assert ok.decision["fallbacks"] == [{"backend": "b", "error": "BackendUnavailable"}]
    failed = record_from(Outcome(_decision(), [], "server", 2.0,
                                 error=AllBackendsFailed("none", [BackendUnavailable("down", backend="b")])))
    assert (failed.status, failed.backend, failed.total_s, failed.answer) == ("error", "b", 2.0, None)
    gone = record_from(Outcome(_decision(), [], "server", 0.2, error=asyncio.CancelledError()))
    assert gone.status == "cancelled" and gone.backend == "a" and gone.error == "the client went away"


def _observe_many(path: str, writer: int, count: int, start_at: float) -> None:
    log = RequestLog(path)
    decision = _decision()
    while time.time() < start_at:
        time.sleep(0.001)
    for seq in range(count):
        log.observe(Outcome(decision, [{"role": "user", "content": f"{writer}:{seq}"}], f"w{writer}", 0.01,
                            error=RuntimeError("x")))
    assert log.flush(timeout_s=60)
    assert log.dropped == 0


def test_eight_processes_through_the_request_log_lose_none(tmp_path):
    path = str(tmp_path / "route.db")
    Store(path).close()
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 1.5
    procs = [ctx.Process(target=_observe_many, args=(path, w, 1000, start_at)) for w in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * 8
    prompts = {row[0] for row in sqlite3.connect(path).execute("SELECT prompt FROM requests")}
    assert prompts == {f"{w}:{s}" for w in range(8) for s in range(1000)}


def test_observe_does_not_write_on_the_callers_thread(tmp_path, monkeypatch):
    import threading

    writers: list[str] = []
    real_log = Store.log

    def spy(self, records):
        writers.append(threading.current_thread().name)
        return real_log(self, records)

    monkeypatch.setattr(Store, "log", spy)
    log = RequestLog(tmp_path / "x.db")
    log.observe(Outcome(_decision(), [], "api", 0.1, error=RuntimeError("x")))
    assert log.flush()
    assert writers and threading.current_thread().name not in writers
