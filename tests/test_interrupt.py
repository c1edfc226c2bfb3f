"""Ctrl-C in a script using the sync Python API (`Router.complete`, `Router.stream`): the call is
cancelled, every upstream request with it, the request is logged as cancelled, and the script
sees one KeyboardInterrupt -- not `aclose(): asynchronous generator is already running` from
generators a KeyboardInterrupt tore through mid-step (router/interrupt.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from router.store import Store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = """
import sys
from router.config_loader import parse_config
from router.core import Router

text = open(sys.argv[1]).read().replace("http://127.0.0.1:8000/v1", sys.argv[2])
router = Router(parse_config(text, "nested.yaml"), source="api")
print("ready", flush=True)
try:
    if sys.argv[3] == "stream":
        for _ in router.stream("Explain CRDTs", model="cns-meta-glm-kimi"):
            pass
    else:
        router.complete("Explain CRDTs", model="cns-meta-glm-kimi")
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
finally:
    router.close()
"""


@pytest.mark.parametrize("mode", ["stream", "complete"])
def test_ctrl_c_cancels_a_sync_call_cleanly(sim, route_home, mode):
    for model in ("glm-5.2", "k2.6"):
        sim.update_profile(model, ttft_s=60)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(ROOT / "examples/nested_consortium.yaml"), sim.base_url, mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        # Ctrl-C as in a terminal, even when this test run was started in the background (SIGINT ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while not all(sim.stats(m)["in_flight"] for m in ("glm-5.2", "k2.6")):  # both inner consortia are waiting
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert out.strip() == "KeyboardInterrupt", out + err
    assert "aclose()" not in err and "Traceback" not in err and err.strip() == "", err
    deadline = time.monotonic() + 10
    while any(sim.stats(m)["in_flight"] for m in ("glm-5.2", "k2.6")):  # the server sees the disconnects next
        assert time.monotonic() < deadline, sim.stats()
        time.sleep(0.02)
    stats = [sim.stats(m) for m in ("glm-5.2", "k2.6")]
    assert sum(s["cancelled"] for s in stats) == sum(s["requests"] for s in stats) >= 2
    assert sum(s["completed"] for s in stats) == 0
    rows = Store().recent(5)
    assert [(r["status"], r["source"], r["requested"]) for r in rows] == [("cancelled", "api", "cns-meta-glm-kimi")]
    assert json.dumps(rows[0]["decision"])  # the decision is kept with the cancelled request
