"""`route serve --workers 2` without Redis, measured from outside: is a rate limit held across the
workers, how soon is a killed worker replaced, and do the other worker's streams notice?

    python benchmarks/workers.py [--code DIR]     # --code: also run another checkout (e.g. main) as the baseline

Against a SIMULATED model server (in this process), each checkout's `route serve --workers 2
--no-log` is started and:

1. limit: `rpm: 60` on the only backend; 200 requests over 10 s (one every 50 ms, each on a new
   connection, so both workers are asked). A limit held for the server admits at most the burst
   of 60 plus what refills while the run lasts (1 a second): the bound printed beside it.
2. kill: streams of ~4 s are opened until each worker holds at least 3; one worker is killed
   (SIGKILL). Printed: how many of the other worker's streams still ended whole, whether the
   server kept running, and the seconds from the kill until a new worker had answered a request
   (polled every 50 ms on new connections; its pid read from /metrics).

Linux only (/proc tells which worker holds which connection).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from backends.simulator import SimServer

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-workers"
FAST = "bench-workers-fast"
WORDS = " ".join(f"w{i}" for i in range(40))


class Serve:
    """`route serve --workers 2` from checkout `code`, its output read on a thread."""

    def __init__(self, code: Path, config: Path):
        env = {**os.environ, "PYTHONPATH": str(code), "ROUTE_HOME": tempfile.mkdtemp(prefix="route-bench-")}
        self.proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", "0", "--workers", "2",
                                      "--no-log", "--config", str(config)], cwd=code, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._ready()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.decode(errors="replace"))

    def _ready(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            found = re.search(r"http://127\.0\.0\.1:(\d+)/v1", "".join(self.output))
            if found and len(self.children()) == 2:
                url = f"http://127.0.0.1:{found.group(1)}"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        return url
            time.sleep(0.05)
        raise RuntimeError("route serve did not start:\n" + "".join(self.output))

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _config(directory: Path, sim: SimServer, rpm: int | None) -> Path:
    """Limited: a model that answers at once (the limit is measured, not the model); else the
    slow one whose streams last about 4 s."""
    path = directory / f"workers-{rpm}.yaml"
    limit = f", rpm: {rpm}" if rpm else ""
    model = FAST if rpm else MODEL
    path.write_text(f"backends:\n  sim: {{kind: openai, model: {model}, base_url: '{sim.base_url}'{limit}}}\n"
                    "routing:\n  tiers: [{name: only, backends: [sim]}]\n")
    return path


def _ask(url: str) -> int:
    """One request on a new connection (the kernel picks the worker): http.client, since an httpx
    Client builds an SSL context each time, which costs more than the request."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        body = json.dumps({"model": "auto", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def limit(code: Path, config: Path, requests: int = 200, seconds: float = 10.0) -> dict[str, float]:
    server = Serve(code, config)
    try:
        started = time.monotonic()
        codes = []
        for i in range(requests):
            time.sleep(max(0.0, started + i * seconds / requests - time.monotonic()))
            codes.append(_ask(server.url))
        elapsed = time.monotonic() - started
    finally:
        server.close()
    return {"admitted": codes.count(200), "refused": codes.count(429), "bound": 60 + int(elapsed * 60 / 60),
            "elapsed": elapsed}


def _server_pid(client_port: int, server_port: int, pids: list[int]) -> int | None:
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)) == (server_port, client_port):
            inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in Path(f"/proc/{pid}/fd").iterdir()):
                return pid
    return None


class _Stream(threading.Thread):
    """One ~4 s stream, read to its end (or its break) on a thread of its own."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.client = httpx.Client(timeout=60)
        self.context = self.client.stream("POST", f"{url}/v1/chat/completions", json={
            "model": "auto", "stream": True, "messages": [{"role": "user", "content": "go"}]})
        self.response = self.context.__enter__()
        self.lines = self.response.iter_lines()
        self.text = ""
        while not self.text:
            self.text += _content(next(self.lines))
        self.port = self.response.extensions["network_stream"].get_extra_info("socket").getsockname()[1]
        self.start()

    def run(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            for line in self.lines:
                self.text += _content(line)
        with contextlib.suppress(Exception):
            self.context.__exit__(None, None, None)
        self.client.close()


def _content(line: str) -> str:
    if not line.startswith("data: {"):
        return ""
    choices = json.loads(line[6:]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""


def kill(code: Path, config: Path) -> dict[str, object]:
    server = Serve(code, config)
    try:
        workers = server.children()
        port = int(server.url.rsplit(":", 1)[1])
        held: dict[int, list[_Stream]] = {pid: [] for pid in workers}
        while min(len(s) for s in held.values()) < 3:
            stream = _Stream(server.url)
            pid = _server_pid(stream.port, port, workers)
            if pid is not None:
                held[pid].append(stream)
        victim, survivor = workers
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        replaced_s = _replacement(server, survivor, killed_at)
        for stream in held[survivor] + held[victim]:
            stream.join(timeout=60)
        return {"other worker's streams whole": f"{sum(s.text == WORDS for s in held[survivor])} of "
                                                f"{len(held[survivor])}",
                "killed worker's streams cut": f"{sum(s.text != WORDS for s in held[victim])} of {len(held[victim])}",
                "server still running": server.proc.poll() is None,
                "replaced, answering after (s)": "never" if replaced_s is None else f"{replaced_s:.2f}"}
    finally:
        server.close()


def _replacement(server: Serve, survivor: int, killed_at: float) -> float | None:
    """Seconds from the kill until a worker other than the survivor and the victim answered."""
    while time.monotonic() - killed_at < 30 and server.proc.poll() is None:
        new = set(server.children()) - {survivor}
        if new and len(server.children()) == 2:
            with contextlib.suppress(httpx.HTTPError, OSError):
                _ask(server.url)
                metrics = httpx.get(f"{server.url}/metrics", timeout=5).text
                if any(f'route_worker_requests{{pid="{pid}"}}' in metrics for pid in new):
                    return time.monotonic() - killed_at
        time.sleep(0.05)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", type=Path, help="another checkout to measure first, as the baseline")
    args = parser.parse_args()
    checkouts = [*([args.code.resolve()] if args.code else []), ROOT]
    profiles = {MODEL: {"ttft_s": 0.0, "tokens_per_s": 10.0, "answer_tokens": 40},
                FAST: {"ttft_s": 0.0, "answer_tokens": 4}}
    sim = SimServer(profiles=profiles)
    with sim, tempfile.TemporaryDirectory() as directory:
        sim.script(MODEL, [WORDS])
        for code in checkouts:
            print(f"{code} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}):")
            figures = limit(code, _config(Path(directory), sim, 60))
            print(f"  rpm 60: admitted {figures['admitted']} of 200 in {figures['elapsed']:.1f} s "
                  f"(a limit held for the server admits at most {figures['bound']})")
            for name, value in kill(code, _config(Path(directory), sim, None)).items():
                print(f"  {name}: {value}")


if __name__ == "__main__":
    main()
