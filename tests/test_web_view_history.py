"""The web view opened after traffic shows it: the latest requests from the request log, then
live ones, in a real headless Chromium against a real `route serve` process and the simulator.
While no page is open the view records nothing per request (the poll API says so before the
page opens); the page's first poll brings the log's latest, a key that is not an admin's sees
only its own, and a logged row opens in full from the log."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backends.simulator import SimProfile, SimServer
from tests.browser import chromium_context
from tests.ports import free_port, wait_until_serving

pytestmark = pytest.mark.integration

KEYS = {"ops": "ops-history-key-" + "o" * 24, "alice": "alice-history-key-" + "a" * 24}
WAIT_MS = 20_000  # how long the page may take to show what the server already knows (polling: ~1 s)
REQUESTS = 500


@contextlib.contextmanager
def _serving(config: Path, env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(config)],
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).parent.parent)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def served(tmp_path, route_home):
    with SimServer({"m-small": SimProfile(answer_tokens=8)}) as sim:
        config = tmp_path / "route.yaml"
        config.write_text(f"""
backends:
  small: {{kind: openai, model: m-small, base_url: '{sim.base_url}', max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [small]}}]
log: {{path: '{tmp_path / "route.db"}'}}
server:
  keys:
    ops: {{key: "${{UI_OPS}}", admin: true}}
    alice: {{key: "${{UI_ALICE}}"}}
""")
        env = {f"UI_{name.upper()}": key for name, key in KEYS.items()}
        with _serving(config, {**env, "ROUTE_HOME": str(route_home)}) as url:
            yield url


def _traffic(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for i in range(REQUESTS):
            key = KEYS["alice"] if i % 10 == 3 else KEYS["ops"]
            answer = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                                 json={"model": "auto", "messages": [{"role": "user", "content": f"question number {i}"}]})
            assert answer.status_code == 200, answer.text


def _poll(url: str, key: str, query: str) -> dict:
    answer = httpx.get(f"{url}/ui/api/poll?{query}", headers={"authorization": f"Bearer {key}"}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_ui_opened_after_500_requests_shows_the_latest_of_them(served):
    from playwright.sync_api import expect

    url = served
    _traffic(url)
    # no page was open: nothing was kept request by request, and the log has them all
    assert _poll(url, KEYS["ops"], "after=0")["requests"] == []
    own = _poll(url, KEYS["alice"], "after=0&history=1")["history"]
    assert own and {row["key"] for row in own} == {"alice"}  # a key's own requests only
    for context in chromium_context(viewport={"width": 1440, "height": 900}):
        page = context.new_page()
        page.goto(f"{url}/ui")
        page.fill("#key", KEYS["ops"])
        page.click("#login-form button")
        rows = page.locator("#request-rows tr[data-seq]")
        expect(rows).to_have_count(100, timeout=WAIT_MS)  # the log's latest hundred
        expect(rows.first).to_contain_text("ops")
        rows.first.click()  # the newest, in full from the log
        expect(page.locator("#detail")).to_contain_text(f"question number {REQUESTS - 1}", timeout=WAIT_MS)
        page.keyboard.press("Escape")
        # live ones follow, above the logged ones
        with httpx.Client(base_url=url, timeout=30) as client:
            answer = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {KEYS['alice']}"},
                                 json={"model": "auto", "messages": [{"role": "user", "content": "one more, live"}]})
            assert answer.status_code == 200
        expect(rows).to_have_count(101, timeout=WAIT_MS)
        expect(rows.first).to_contain_text("alice")
        expect(rows.nth(1)).to_contain_text("ops")
