"""The request log: one record per routed request from the Python API (and so the CLI and
server), written off the caller's thread; content optional; never a key."""

from __future__ import annotations

import asyncio
import gc
import json
import multiprocessing
import sqlite3
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from backends.errors import AllBackendsFailed, BackendUnavailable
from backends.types import Completion, Timings, Usage
from router.config_loader import load_config
from router.core import Router
from router.decision import Outcome, RouteResult
from router.store import Store, default_store_path
from router.store.request_log import RequestLog, record_from
from tests.helpers import decision

pytestmark = pytest.mark.unit


def _config(sim, **top):
    return {
        "backends": {"fast": {"kind": "openai", "model": "m-fast", "base_url": sim.base_url, "max_retries": 0,
                              "price": {"input": 1.0, "output": 2.0}, "api_key": "${ROUTE_TEST_KEY}"}},
        "routing": {"tiers": [{"name": "only", "backends": ["fast"]}]},
        **top,
    }


SECRET = "sk-test-do-not-store-0123456789abcdef"


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
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


@pytest.mark.integration
def test_log_path_comes_from_config(sim, tmp_path):
    target = tmp_path / "elsewhere" / "log.db"
    config = _config(sim, log={"path": str(target)})
    del config["backends"]["fast"]["api_key"]
    with Router(load_config(config)) as router:
        router.complete("hi")
        router.request_log.flush()
    assert Store(target).count() == 1
    assert not default_store_path().exists()


def test_record_from_maps_success_error_and_cancellation():
    completion = Completion(text="hi", backend="a", model="m", usage=Usage(3, 5), timings=Timings(0.1, 0.4, 20.0),
                            cost_usd=0.01, metadata={"trace": {"id": "t-1"}, "simulated": True})
    ok = record_from(Outcome(decision(), [{"role": "user", "content": "q"}], "cli", 0.5,
                             result=RouteResult(completion, decision(), (BackendUnavailable("x", backend="b"),))),
                     ended_at=1000.0)
    assert (ok.status, ok.backend, ok.trace_id, ok.ts, ok.ttft_s, ok.total_s) == ("ok", "a", "t-1", 999.5, 0.1, 0.4)
    assert ok.decision["fallbacks"] == [{"backend": "b", "error": "BackendUnavailable"}]
    failed = record_from(Outcome(decision(), [], "server", 2.0,
                                 error=AllBackendsFailed("none", [BackendUnavailable("down", backend="b")])))
    assert (failed.status, failed.backend, failed.total_s, failed.answer) == ("error", "b", 2.0, None)
    gone = record_from(Outcome(decision(), [], "server", 0.2, error=asyncio.CancelledError()))
    assert gone.status == "cancelled" and gone.backend == "a" and gone.error == "the client went away"


def _observe_many(path: str, writer: int, count: int, start_at: float) -> None:
    log = RequestLog(path)
    made = decision()
    while time.time() < start_at:
        time.sleep(0.001)
    for seq in range(count):
        log.observe(Outcome(made, [{"role": "user", "content": f"{writer}:{seq}"}], f"w{writer}", 0.01,
                            error=RuntimeError("x")))
    assert log.flush(timeout_s=60)
    assert log.dropped == 0


@pytest.mark.integration
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
    real_log = Store.log_rows

    def spy(self, rows):
        writers.append(threading.current_thread().name)
        return real_log(self, rows)

    monkeypatch.setattr(Store, "log_rows", spy)
    log = RequestLog(tmp_path / "x.db")
    log.observe(Outcome(decision(), [], "api", 0.1, error=RuntimeError("x")))
    assert log.flush()
    assert writers and threading.current_thread().name not in writers


def test_summarize_per_backend_figures():
    from router.store.stats import percentile, summarize

    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5 and percentile([], 50) is None
    rows = [{"backend": "a", "status": "ok", "total_s": t, "ttft_s": t / 10, "decode_tps": 100.0 * t,
             "output_tokens": 10, "input_tokens": 1, "cost_usd": 0.5} for t in (1.0, 2.0, 3.0)]
    rows += [{"backend": "b", "status": "error", "total_s": 9.0},
             {"backend": "b", "status": "ok", "total_s": 0.5, "output_tokens": 4, "cost_usd": 0.25},
             {"backend": "b", "status": "cancelled", "total_s": 0.1}]
    a, b = summarize(rows)
    assert (a.backend, a.requests, a.share, a.p50_s, a.ttft_p50_s, a.tokens_per_s) == ("a", 3, 0.5, 2.0, 0.2, 200.0)
    assert a.p95_s == pytest.approx(2.9) and a.cost_usd == 1.5 and a.output_tokens == 30 and a.error_rate == 0
    assert (b.requests, b.errors, b.cancelled, b.error_rate, b.p50_s) == (3, 1, 1, 0.5, 0.5)


@pytest.mark.integration
def test_route_log_and_stats_commands_read_the_log(sim, tmp_path):
    import json

    from typer.testing import CliRunner

    from router.cli.app import app

    config = _config(sim)
    del config["backends"]["fast"]["api_key"]
    with Router(load_config(config), source="cli") as router:
        router.complete("first")
        sim.set_faults("m-fast", ["500"])
        with pytest.raises(AllBackendsFailed):
            router.complete("second")
        router.request_log.flush()
    import yaml

    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(config))
    runner = CliRunner()
    shown = runner.invoke(app, ["log", "--json", "-c", str(config_file)])
    assert shown.exit_code == 0, shown.output
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(r["prompt"], r["status"]) for r in records] == [("second", "error"), ("first", "ok")]
    errors = runner.invoke(app, ["log", "--json", "--status", "error", "-c", str(config_file)])
    assert [json.loads(line)["prompt"] for line in errors.stdout.splitlines()] == ["second"]
    stats = runner.invoke(app, ["stats", "--json", "--since", "1h", "-c", str(config_file)])
    assert stats.exit_code == 0, stats.output
    [fast] = json.loads(stats.stdout)["backends"]
    assert (fast["backend"], fast["requests"], fast["errors"], fast["error_rate"]) == ("fast", 2, 1, 0.5)
    table = runner.invoke(app, ["stats", "-c", str(config_file)])
    assert table.exit_code == 0 and "fast" in table.stdout
    bad = runner.invoke(app, ["stats", "--since", "soon", "-c", str(config_file)])
    assert bad.exit_code == 2 and "--since" in bad.output
    plot = tmp_path / "latency.png"
    drawn = runner.invoke(app, ["stats", "--plot", str(plot), "-c", str(config_file)])
    try:
        import matplotlib  # noqa: F401  (the optional `plot` extra)
    except ImportError:
        assert drawn.exit_code == 2 and "plot extra" in drawn.output and not plot.exists()
    else:
        assert drawn.exit_code == 0 and plot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.integration
def test_route_ask_logs_unless_no_log(sim, tmp_path):
    import yaml
    from typer.testing import CliRunner

    from router.cli.app import app

    config = _config(sim)
    del config["backends"]["fast"]["api_key"]
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(config))
    runner = CliRunner()
    assert runner.invoke(app, ["ask", "--no-log", "-c", str(config_file), "unlogged"]).exit_code == 0
    assert runner.invoke(app, ["ask", "-c", str(config_file), "logged"]).exit_code == 0
    RequestLog().flush()
    assert [(r["source"], r["prompt"]) for r in Store().recent(5)] == [("cli", "logged")]


THOUGHT_REPLY = "<|channel>thought\nfirst add two and two<channel|>the answer is 4"


def _thinking_config(sim, tmp_path, **log):
    import yaml

    sim.script("m-fast", [THOUGHT_REPLY])
    config = _config(sim, log=log)
    del config["backends"]["fast"]["api_key"]
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(config))
    return config, config_file


@pytest.mark.integration
def test_thinking_is_not_logged_by_default(sim, tmp_path):
    config, _ = _thinking_config(sim, tmp_path)
    with Router(load_config(config)) as router:
        assert router.complete("what is 2+2?").completion.thinking == "first add two and two"
        list(router.stream("and streamed?"))
        router.request_log.flush()
    rows = Store().recent(5)
    assert [(r["answer"], r["thinking"]) for r in rows] == [("the answer is 4", None)] * 2
    for file in default_store_path().parent.iterdir():  # the database, its WAL and shared-memory files
        assert b"first add two" not in file.read_bytes()


@pytest.mark.integration
def test_store_thinking_keeps_it_in_its_own_column_cut_like_answers_and_log_show_prints_it(sim, tmp_path):
    from typer.testing import CliRunner

    from router.cli.app import app

    config, config_file = _thinking_config(sim, tmp_path, store_thinking=True, max_content_chars=12)
    with Router(load_config(config)) as router:
        router.complete("what is 2+2?")
        list(router.stream("and streamed?"))
        router.request_log.flush()
    streamed, plain = Store().recent(5)
    for row in (streamed, plain):
        assert row["thinking"].startswith("first add tw\n[… truncated by route: 21 characters in all")
        assert row["answer"].startswith("the answer i\n[… truncated") and "first add" not in row["answer"]
    shown = CliRunner().invoke(app, ["log", "show", str(plain["id"]), "-c", str(config_file)])
    assert shown.exit_code == 0, shown.output
    prompt, thinking, answer = (shown.stdout.index(f"── {t} ──") for t in ("prompt", "thinking", "answer"))
    assert prompt < thinking < answer and "first add tw" in shown.stdout[thinking:answer]
    as_json = CliRunner().invoke(app, ["log", "show", str(plain["id"]), "--json", "-c", str(config_file)])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["thinking"] == plain["thinking"]


@pytest.mark.integration
def test_store_thinking_needs_store_content(sim, tmp_path):
    config, _ = _thinking_config(sim, tmp_path, store_thinking=True, store_content=False)
    with Router(load_config(config)) as router:
        router.complete("what is 2+2?")
        router.request_log.flush()
    [row] = Store().recent(5)
    assert row["thinking"] is None and row["answer"] is None and row["output_tokens"] > 0


def test_record_from_keeps_thinking_only_when_asked():
    completion = Completion(text="4", backend="a", model="m", thinking="two and two", usage=Usage(3, 5))
    outcome = Outcome(decision(), [{"role": "user", "content": "q"}], "cli", 0.5,
                      result=RouteResult(completion, decision()))
    assert record_from(outcome).thinking is None
    assert record_from(outcome, store_thinking=True).thinking == "two and two"
    assert record_from(outcome, store_thinking=True, store_content=False).thinking is None
    assert record_from(outcome, store_thinking=True).answer == "4"


_FORKED_WORKER = """
import os, sys, traceback
from router.store.request_log import RequestLog
from tests.helpers import ok_outcome

log = RequestLog(sys.argv[1])
log._writer.interval_s = 3600.0  # the parent's record stays queued across the fork, its writer idle
log.observe(ok_outcome("parent"))  # the parent's writer thread is running at the fork
pid = os.fork()
if pid == 0:
    code = 1
    try:
        log.observe(ok_outcome("child"))
        flushed = log.flush(timeout_s=60)
        code = 0 if flushed and log.dropped == 0 else 1
        print(f"child: flushed {flushed}, dropped {log.dropped}", flush=True)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
print(f"child exit {os.waitstatus_to_exitcode(status)}; parent flushed {log.flush(timeout_s=60)}", flush=True)
"""


@pytest.mark.integration
def test_a_forked_worker_writes_through_the_log_it_inherited(tmp_path):
    """A process that forks after its Router (and its log) exist: the child has no writer thread
    of its own until it logs, and must not write what the parent queued. Run in a process of its
    own, whose only other thread is the log's writer, idle at the fork: a fork while some thread
    is inside SQLite (a test worker's leftover writers, servers) can leave SQLite's own mutexes
    held in the child, which no code of ours can undo -- CPython warns of fork in a threaded
    process for that reason."""
    ran = subprocess.run([sys.executable, "-c", _FORKED_WORKER, str(tmp_path / "f.db")], capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    said = ran.stdout + ran.stderr
    assert ran.returncode == 0 and "child exit 0; parent flushed True" in said, said
    assert sorted(r["prompt"] for r in Store(tmp_path / "f.db").recent(10)) == ["child", "parent"]


class _Conversation(list):
    """A message list that can be watched for being let go (a plain list cannot)."""


@pytest.mark.integration
@pytest.mark.parametrize("session", [None, "auto"])
def test_a_record_waiting_for_the_writer_does_not_hold_the_conversation(tmp_path, sim, session):
    """Records wait for the writer thread, hundreds of them under load; the decision's task (and
    a session plan's) holds the conversation as the client sent it (an agent's is often hundreds
    of kilobytes), and the record does not show it: a queued record holds neither."""
    router = Router(load_config({**_config(sim), "log": {"enabled": False}}))
    conversation = _Conversation([{"role": "user", "content": "Refactor the parser. " * 500}])
    made = router.decide(conversation, session=session)
    assert made.task is not None and made.task.conversation is conversation
    assert (made.session is None) == (session is None)
    log = RequestLog(str(tmp_path / "route.db"))
    log._writer.interval_s = 3600.0  # the record stays queued while the test looks
    log.observe(Outcome(made, conversation, "server", 0.1, error=RuntimeError("x")))
    watched = weakref.ref(conversation)
    del made, conversation
    gc.collect()
    assert log._writer.pending == 1
    assert watched() is None, "a queued log record keeps the whole conversation alive"
    assert log.flush(timeout_s=60)
    (row,) = Store(str(tmp_path / "route.db")).recent(10)
    assert row["decision"]["chosen"] == "fast" and row["prompt"].startswith("Refactor the parser.")
    assert ("session" in row["decision"]) == (session is not None)
    if session is not None:
        assert row["decision"]["session"]["tier_index"] == 0 and row["decision"]["session"]["calls_before"] == 0


@pytest.mark.integration
def test_a_decision_without_its_conversation_keeps_every_other_field(sim):
    """`without_conversation` builds the copy field by field (it runs on every logged request):
    a field added to Decision must be carried over too, not silently reset to its default."""
    import dataclasses

    made = Router(load_config({**_config(sim), "log": {"enabled": False}})).decide(
        [{"role": "user", "content": "Refactor the parser."}], session="auto", deadline_s=3.0)
    assert made.session is not None and made.task is not None and made.score is not None
    assert made.without_conversation() == dataclasses.replace(made, task=None, session=None)
    changed = {f.name for f in dataclasses.fields(made)
               if getattr(made, f.name) != getattr(made.without_conversation(), f.name)}
    assert changed == {"task", "session"}
