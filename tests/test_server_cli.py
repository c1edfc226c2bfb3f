"""`route serve` as a real process: it serves with auth from the environment, never prints the
token, and on SIGTERM finishes an in-flight stream, then flushes the request log and exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from router.store import Store
from tests.ports import free_port, wait_until_serving

pytestmark = pytest.mark.integration  # subprocesses and servers

TOKEN = "serve-cli-token-" + "z" * 24



@pytest.mark.slow
def test_route_serve_process_drains_on_sigterm_and_logs(sim, tmp_path, route_home):
    sim.update_profile("m-slow", ttft_s=0.0, tokens_per_s=20.0, answer_tokens=20)  # ~1 s
    sim.script("m-slow", [" ".join(f"t{i}" for i in range(20))])
    config = tmp_path / "serve.yaml"
    config.write_text(f"backends:\n  slow: {{kind: openai, model: m-slow, base_url: '{sim.base_url}'}}\n"
                      "routing:\n  tiers: [{name: only, backends: [slow]}]\n")
    port = free_port()
    env = {**os.environ, "ROUTE_TEST_TOKEN": TOKEN, "ROUTE_HOME": str(route_home)}
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config",
                             str(config), "--api-key-env", "ROUTE_TEST_TOKEN"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent)
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}")
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=TOKEN, max_retries=0, timeout=20)
        stream = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": "go"}],
                                                stream=True)
        parts = [next(stream).choices[0].delta.content or ""]
        proc.send_signal(signal.SIGTERM)
        parts += [c.choices[0].delta.content or "" for c in stream if c.choices]
        assert "".join(parts) == " ".join(f"t{i}" for i in range(20))
        # uvicorn re-raises the signal after its graceful shutdown, so "killed by SIGTERM" is a clean exit
        assert proc.wait(timeout=20) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.stdout.read().decode()
    assert "route serve: http://127.0.0.1:" in output and "ROUTE_TEST_TOKEN" in output
    assert TOKEN not in output
    [row] = Store().recent(5)
    assert (row["source"], row["status"], row["backend"]) == ("server", "ok", "slow")
