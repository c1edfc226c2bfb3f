"""The web view in a real headless Chromium, against a real `route serve` process and the
simulated model server: after routed, forced, failing and consortium requests, the rendered page
shows every backend, the newest request with its reasons, the breaker the failures opened, and
the consortium's timeline with its members; new requests appear without a reload; a click opens
the request as `route log show` does. The browser signs in with the server's key, which never
appears in a URL, the page or a cookie."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backends.simulator import SimProfile, SimServer
from router.consortium.simulated import arbiter_responder
from tests.browser import chromium_context
from tests.ports import free_port, wait_until_serving

pytestmark = pytest.mark.integration

KEY = "ui-browser-key-" + "k" * 24
WAIT_MS = 20_000  # how long the page may take to show what the server already knows (polling: ~1 s)
PROFILES = {
    "m-small": SimProfile(answer_tokens=12), "m-big": SimProfile(answer_tokens=12),
    "m-flaky": SimProfile(answer_tokens=12), "glm-5.2": SimProfile(ttft_s=0.01, answer_tokens=12),
    "judge": SimProfile(responder=arbiter_responder(confidence=0.9)),
}


def _config(sim_url: str) -> str:
    backend = "{{kind: openai, model: {model}, base_url: '" + sim_url + "', max_retries: 0}}"
    return f"""
backends:
  small: {backend.format(model="m-small")}
  big: {backend.format(model="m-big")}
  flaky: {backend.format(model="m-flaky")}
  glm: {backend.format(model="glm-5.2")}
  judge: {backend.format(model="judge")}
routing:
  scorer: {{kind: length, threshold_chars: 200}}
  tiers: [{{name: low, below: 0.5, backends: [small]}}, {{name: high, backends: [big]}}]
  breaker: {{failures: 2, cooldown_ms: 600000}}
consortia:
  panel: {{members: ["glm*2"], arbiter: judge, judging: rank}}
server:
  keys:
    tester: {{key: "${{UI_TEST_KEY}}"}}
"""



@contextlib.contextmanager
def _serving(config: Path, env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """`route serve` on `config`, as a process of its own: (its URL, the first line it printed)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(config)],
                            env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).parent.parent)
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()  # printed once the port is bound, before serving
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url)
        yield url, banner
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def served(tmp_path, route_home):
    """(server URL, simulator, first line route serve printed)."""
    with SimServer(PROFILES) as sim:
        config = tmp_path / "route.yaml"
        config.write_text(_config(sim.base_url))
        with _serving(config, {"UI_TEST_KEY": KEY, "ROUTE_HOME": str(route_home)}) as (url, banner):
            yield url, sim, banner


def _ask(url: str, model: str, prompt: str) -> int:
    return httpx.post(f"{url}/v1/chat/completions", headers={"authorization": f"Bearer {KEY}"}, timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": prompt}]}).status_code


def test_the_rendered_page_shows_backends_reasons_a_breaker_and_a_consortium_and_keeps_updating(served):
    from playwright.sync_api import expect

    url, sim, banner = served
    assert f"{url}/ui" in banner  # route serve says where the view is

    for context in chromium_context(viewport={"width": 1440, "height": 900}):
        page = context.new_page()
        page.goto(f"{url}/ui")
        page.fill("#key", KEY)  # signing in: the key goes in a form, never in a URL
        page.click("#login-form button")
        # The view keeps requests while a page is open: the traffic comes once this one polls.
        expect(page.locator("#sources")).to_contain_text("kept while a page is open", timeout=WAIT_MS)
        assert _ask(url, "auto", "hello from the browser test") == 200  # routed: small, by score
        assert _ask(url, "big", "forced by name") == 200
        sim.set_faults("m-flaky", ["500", "500"])
        assert [_ask(url, "flaky", "this one fails") for _ in range(2)] == [503, 503]  # two failures open its breaker
        assert _ask(url, "panel", "a question for two samples and a judge") == 200
        rows = page.locator("#request-rows tr[data-seq]")
        expect(rows).to_have_count(5, timeout=WAIT_MS)

        for name in ("small", "big", "flaky", "glm", "judge"):
            expect(page.locator(f'#backend-cards [data-backend="{name}"]')).to_be_visible()
        expect(page.locator('[data-backend="flaky"] .pill')).to_have_text("breaker open")
        expect(page.locator('[data-backend="small"] .pill')).to_have_text("breaker closed")

        newest = rows.first  # the consortium run, with why it went there
        expect(newest).to_contain_text("panel")
        expect(newest).to_contain_text("asked for panel by name")
        routed = rows.filter(has_text="low|high")  # found by its text: new rows push it down
        expect(rows.nth(4)).to_contain_text("stays low")
        expect(routed).to_contain_text("low|high: score")
        expect(routed).to_contain_text("< 0.500 → stays low")
        expect(routed).to_contain_text("tester")  # the key's name, never its value
        expect(rows.nth(2)).to_contain_text("tried flaky: failed (BackendUnavailable)")

        run = page.locator('.run[data-consortium="panel"]')
        for label in ("glm#1", "glm#2", "arbiter judge"):
            expect(run.locator(".tl .label", has_text=label)).to_be_visible()
        expect(run).to_contain_text("budget 3 of 64 calls")
        expect(run.locator(".verdict")).to_contain_text(re.compile(r"ranking glm#\d > glm#\d · confidence 0.90"))

        page.evaluate("window.notReloaded = true")
        assert _ask(url, "big", "one more, while the page is open") == 200
        expect(rows).to_have_count(6, timeout=WAIT_MS)
        expect(rows.first).to_contain_text("asked for big by name")
        assert page.evaluate("window.notReloaded") is True

        routed.click()  # the request in full, as `route log show` prints it
        detail = page.locator("#detail")
        expect(detail).to_contain_text("hello from the browser test", timeout=WAIT_MS)
        expect(detail.locator(".detail-grid")).to_contain_text("asked for")

        assert KEY not in page.content() and all(KEY not in u for u in [page.url])
        [cookie] = context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == ("route_ui", True, "Strict", "/ui")
        assert KEY not in cookie["value"]


# -- who sees what -----------------------------------------------------------------------------------

OWN_KEYS = {"alice": "alice-browser-key-" + "a" * 24, "bob": "bob-browser-key-" + "b" * 24,
            "ops": "ops-browser-key-" + "o" * 24}


@pytest.fixture
def keyed(tmp_path, route_home):
    """A server with two client keys and an admin key: (URL)."""
    with SimServer({"m-small": SimProfile(answer_tokens=8)}) as sim:
        config = tmp_path / "keys.yaml"
        config.write_text(f"""
backends:
  small: {{kind: openai, model: m-small, base_url: '{sim.base_url}', max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [small]}}]
server:
  keys:
    alice: {{key: "${{UI_ALICE}}"}}
    bob: {{key: "${{UI_BOB}}"}}
    ops: {{key: "${{UI_OPS}}", admin: true}}
""")
        env = {f"UI_{name.upper()}": key for name, key in OWN_KEYS.items()}
        with _serving(config, {**env, "ROUTE_HOME": str(route_home)}) as (url, _):
            yield url


def test_the_page_shows_a_key_its_own_requests_only_and_an_admin_every_one(keyed):
    from playwright.sync_api import expect

    url = keyed
    for context in chromium_context(viewport={"width": 1440, "height": 900}):
        page = context.new_page()
        page.goto(f"{url}/ui")
        page.fill("#key", OWN_KEYS["alice"])
        page.click("#login-form button")
        expect(page.locator("#sources")).to_contain_text("kept while a page is open", timeout=WAIT_MS)
        for name, prompt in (("alice", "alice asks about tides"), ("bob", "bob's private question")):
            answer = httpx.post(f"{url}/v1/chat/completions", headers={"x-api-key": OWN_KEYS[name]}, timeout=30,
                                json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
            assert answer.status_code == 200, answer.text
        rows = page.locator("#request-rows tr[data-seq]")
        expect(rows).to_have_count(1, timeout=WAIT_MS)
        expect(rows.first).to_contain_text("alice")
        expect(page.locator("#signed-in")).to_contain_text("signed in as alice (your requests only)")
        rows.first.click()
        expect(page.locator("#detail")).to_contain_text("alice asks about tides", timeout=WAIT_MS)
        # The log API, from the page with its cookie: bob's request (number 2) is not alice's to read.
        status = page.evaluate("fetch('/ui/api/request?seq=2').then(r => r.status)")
        assert status == 404
        assert "bob's private question" not in page.content()

        page.keyboard.press("Escape")  # the request's dialog closes
        page.click("#sign-out")
        page.fill("#key", OWN_KEYS["ops"])
        page.click("#login-form button")
        expect(rows).to_have_count(2, timeout=WAIT_MS)
        expect(page.locator("#request-rows")).to_contain_text("bob")
        expect(page.locator("#signed-in")).to_have_text("signed in as ops")
