"""`route serve --workers N` as real processes in front of the simulator: connections reach every
worker, /metrics adds up across them, the request log gets every request, and SIGTERM (or the
parent's death) leaves no process and no metrics directory behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest
from typer.testing import CliRunner

from router.cli.app import app
from router.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.skipif(sys.platform != "linux", reason="Linux: /proc, SO_REUSEPORT")]

ROOT = Path(__file__).parent.parent
REQUESTS = 40  # over fresh connections: the chance all land on one of two workers is 2**-39


class _Serve:
    """`route serve` in a subprocess; its output is read on a thread so the pipe never fills."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_ready()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.decode(errors="replace"))

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + 60
        url = None
        while True:
            assert self.proc.poll() is None and time.monotonic() < deadline, "".join(self.output)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/v1", "".join(self.output))
            url = url or (found and f"http://127.0.0.1:{found.group(1)}")
            if url and len(self.children()) == 2 and _healthy(url):
                return url
            time.sleep(0.1)

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _config(tmp_path: Path, sim) -> Path:
    config = tmp_path / "serve.yaml"
    config.write_text(f"backends:\n  sim: {{kind: openai, model: m-workers, base_url: '{sim.base_url}'}}\n"
                      "routing:\n  tiers: [{name: only, backends: [sim]}]\n")
    return config


def _metrics_dir(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    [value] = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    return Path(value.decode())


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")  # a zombie no one reaped


def _wait_gone(pids: list[int], limit_s: float = 30.0) -> bool:
    deadline = time.monotonic() + limit_s
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _samples(text: str, name: str) -> dict[str, float]:
    return {labels: float(value) for labels, value in re.findall(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


@pytest.mark.slow
def test_two_workers_share_the_port_and_their_metrics_and_log_add_up(sim, tmp_path, route_home):
    server = _Serve("--workers", "2", "--config", str(_config(tmp_path, sim)))
    try:
        workers = server.children()
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        for _ in range(REQUESTS):
            with httpx.Client(timeout=30) as client:  # a new connection, so a new source port, each time
                assert client.post(f"{server.url}/v1/chat/completions", json=body).status_code == 200
        text = httpx.get(f"{server.url}/metrics", timeout=10).text
        per_worker = _samples(text, "route_worker_requests")
        assert {f'{{pid="{pid}"}}' for pid in workers} == set(per_worker)
        assert all(count > 0 for count in per_worker.values()) and sum(per_worker.values()) == REQUESTS
        assert sum(_samples(text, "route_requests_total").values()) == REQUESTS
        assert _samples(text, "route_in_flight_requests") == {"": 0.0}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.close()
    assert _wait_gone(workers)
    assert len(Store().recent(REQUESTS + 10)) == REQUESTS  # both workers wrote the one log


@pytest.mark.slow
def test_sigterm_drains_a_stream_then_stops_every_worker_and_removes_the_metrics_dir(sim, tmp_path, route_home):
    sim.update_profile("m-workers", ttft_s=0.0, tokens_per_s=20.0, answer_tokens=20)  # ~1 s
    sim.script("m-workers", [" ".join(f"t{i}" for i in range(20))])
    server = _Serve("--workers", "2", "--no-log", "--config", str(_config(tmp_path, sim)))
    try:
        workers = server.children()
        metrics_dir = _metrics_dir(workers[0])
        assert metrics_dir.is_dir()
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=30)
        stream = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "go"}],
                                                stream=True)
        parts = [next(stream).choices[0].delta.content or ""]
        server.proc.send_signal(signal.SIGTERM)
        parts += [c.choices[0].delta.content or "" for c in stream if c.choices]
        assert "".join(parts) == " ".join(f"t{i}" for i in range(20))
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.close()
    assert _wait_gone(workers)
    assert not metrics_dir.exists()
    assert "Traceback" not in "".join(server.output)


@pytest.mark.slow
def test_workers_stop_when_the_parent_is_killed(sim, tmp_path, route_home):
    server = _Serve("--workers", "2", "--no-log", "--config", str(_config(tmp_path, sim)))
    workers = server.children()
    metrics_dir = _metrics_dir(workers[0])
    try:
        server.proc.kill()  # no chance to stop them: each sees its pipe from the parent close
        server.proc.wait()
        assert _wait_gone(workers)
    finally:
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
        if metrics_dir.exists():  # only a parent that lives to the end removes it
            for path in metrics_dir.iterdir():
                path.unlink()
            metrics_dir.rmdir()


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_worker_count_is_a_usage_error(value):
    result = CliRunner().invoke(app, ["serve", "--workers", value])
    assert result.exit_code == 2
    assert "--workers" in result.output and "Traceback" not in result.output


def test_serve_help_documents_workers():
    result = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--workers" in result.output and "/metrics adds up" in result.output


@pytest.mark.slow
def test_a_dead_worker_stops_the_others_and_the_parent_says_so(sim, tmp_path, route_home):
    server = _Serve("--workers", "2", "--no-log", "--config", str(_config(tmp_path, sim)))
    try:
        workers = server.children()
        os.kill(workers[0], signal.SIGKILL)
        assert server.proc.wait(timeout=60) == 1
    finally:
        server.close()
    assert _wait_gone(workers)
    output = "".join(server.output)
    assert f"worker {workers[0]} was killed by SIGKILL" in output and "Traceback" not in output
