"""`route serve --workers N` as real processes in front of the simulator: connections reach every
worker, /metrics adds up across them, the request log gets every request, and SIGTERM (or the
parent's death) leaves no process and no metrics directory behind."""

from __future__ import annotations

import contextlib
import json
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
def test_a_worker_that_fails_to_start_stops_the_others_and_the_parent_says_so(sim, tmp_path, route_home):
    config = _config(tmp_path, sim)
    server = _Serve("--workers", "2", "--no-log", "--config", str(config))
    try:
        workers = server.children()
        config.write_text("backends: [this is no longer a config]\n")  # what a replacement will read
        os.kill(workers[0], signal.SIGKILL)
        assert server.proc.wait(timeout=60) == 1
    finally:
        server.close()
    assert _wait_gone(workers)
    output = "".join(server.output)
    assert "before it served" in output and "Traceback" not in output


def _rpm_config(tmp_path: Path, sim, rpm: int) -> Path:
    config = tmp_path / "limited.yaml"
    config.write_text(f"backends:\n  sim: {{kind: openai, model: m-workers, base_url: '{sim.base_url}', rpm: {rpm}}}\n"
                      "routing:\n  tiers: [{name: only, backends: [sim]}]\n")
    return config


@pytest.mark.slow
def test_two_workers_hold_one_rate_limit_between_them(sim, tmp_path, route_home):
    """rpm 3 is a burst of 3, then one more every 20 s, whichever worker is asked: without Redis
    the workers share their buckets (and breakers) through the supervisor's state file."""
    rpm = 3
    server = _Serve("--workers", "2", "--no-log", "--config", str(_rpm_config(tmp_path, sim, rpm)))
    try:
        body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        started = time.monotonic()
        codes = []
        for _ in range(REQUESTS):
            with httpx.Client(timeout=30) as client:  # a new connection each time: both workers are asked
                codes.append(client.post(f"{server.url}/v1/chat/completions", json=body).status_code)
        refilled = int((time.monotonic() - started) * rpm / 60)  # what the bucket may have regained meanwhile
        per_worker = _samples(httpx.get(f"{server.url}/metrics", timeout=10).text, "route_worker_requests")
    finally:
        server.close()
    assert len(per_worker) == 2 and all(count > rpm for count in per_worker.values())  # each alone would admit 3
    assert set(codes) == {200, 429}
    assert rpm <= codes.count(200) <= rpm + refilled


def _server_pid(client_port: int, server_port: int, pids: list[int]) -> int | None:
    """Which of `pids` holds the server end of the loopback connection from `client_port`."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(fields[i].split(":")[1], 16) for i in (1, 2))
        if (local, remote) == (server_port, client_port):
            inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in fds.iterdir()):
                return pid
    return None


class _Stream:
    """One streamed chat completion, its first content read, the rest read on demand."""

    def __init__(self, url: str):
        self.client = httpx.Client(timeout=60)
        self.context = self.client.stream("POST", f"{url}/v1/chat/completions", json={
            "model": "auto", "stream": True, "messages": [{"role": "user", "content": "go"}]})
        self.response = self.context.__enter__()
        self.lines = self.response.iter_lines()
        self.text = ""
        while not self.text:
            self.text += _content(next(self.lines))
        sock = self.response.extensions["network_stream"].get_extra_info("socket")
        self.port = sock.getsockname()[1]

    def rest(self) -> str:
        """The whole text, or what came before the connection broke."""
        with contextlib.suppress(httpx.HTTPError):
            for line in self.lines:
                self.text += _content(line)
        return self.text

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.context.__exit__(None, None, None)
        self.client.close()


def _content(line: str) -> str:
    if not line.startswith("data: {"):
        return ""
    choices = json.loads(line[6:]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""


@pytest.mark.slow
def test_a_killed_worker_is_replaced_while_the_others_streams_go_on(sim, tmp_path, route_home):
    words = " ".join(f"w{i}" for i in range(30))
    sim.update_profile("m-workers", ttft_s=0.0, tokens_per_s=10.0, answer_tokens=30)  # ~3 s a stream
    sim.script("m-workers", [words])
    server = _Serve("--workers", "2", "--no-log", "--config", str(_config(tmp_path, sim)))
    streams: list[_Stream] = []
    try:
        workers = server.children()
        port = int(server.url.rsplit(":", 1)[1])
        held: dict[int, list[_Stream]] = {pid: [] for pid in workers}
        while not all(held.values()) and len(streams) < REQUESTS:  # a stream on each worker
            streams.append(_Stream(server.url))
            held[_server_pid(streams[-1].port, port, workers)].append(streams[-1])
        killed, kept = workers
        os.kill(killed, signal.SIGKILL)
        assert all(stream.rest() == words for stream in held[kept])  # whole, as if nothing happened
        deadline = time.monotonic() + 60
        while killed in server.children() or len(server.children()) != 2:
            assert server.proc.poll() is None and time.monotonic() < deadline, "".join(server.output)
            time.sleep(0.05)
        [new] = set(server.children()) - {kept}
        served: dict[str, float] = {}
        while f'{{pid="{new}"}}' not in served:  # the replacement answers on the port
            assert time.monotonic() < deadline, "".join(server.output)
            with httpx.Client(timeout=30) as client:
                answer = client.post(f"{server.url}/v1/chat/completions", json={
                    "model": "auto", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
                assert answer.status_code == 200
            served = _samples(httpx.get(f"{server.url}/metrics", timeout=10).text, "route_worker_requests")
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0
    finally:
        for stream in streams:
            stream.close()
        server.close()
    output = "".join(server.output)
    assert f"worker {killed} was killed by SIGKILL" in output and "Traceback" not in output
