"""Screenshots of `route serve`'s web view, one PNG per panel, from a real server and a real browser.

    python benchmarks/ui_screenshots.py [--out docs/images]

Starts the SIMULATED model server in this process, `route serve` as a subprocess with two client
keys (alice, ci), sends it a mix of traffic -- routed prompts of three difficulties over the
OpenAI and Anthropic protocols, a forced backend, a backend that fails until its breaker opens,
a consortium and a nested one, feedback -- then signs in with headless Chromium (Debian's
`chromium`; Python's `playwright` drives it, no browser download) and saves, in light mode at a
laptop's 1440x900: the sign-in form, each panel (requests, a request opened, backends,
consortia, cost, learning), and the whole page in dark mode. Every answer is simulated.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.simulator import SimProfile, SimServer  # noqa: E402
from router.consortium.simulated import judge_when_asked  # noqa: E402

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1440, "height": 900}

PROFILES = {
    "google/diffusiongemma-26B-A4B-it": SimProfile(ttft_s=0.03, decoding="diffusion", canvas_s=0.09, answer_tokens=90),
    "gemma-3-27b-it": SimProfile(ttft_s=0.02, tokens_per_s=900.0, answer_tokens=60),
    "mercury-2": SimProfile(ttft_s=0.12, decoding="diffusion", canvas_s=0.08, answer_tokens=120,
                            responder=judge_when_asked(confidence=0.86)),
    "claude-sonnet-4-5": SimProfile(ttft_s=0.45, tokens_per_s=240.0, answer_tokens=160),
    "glm-5.2": SimProfile(ttft_s=0.2, tokens_per_s=300.0, answer_tokens=80),
    "k2.6": SimProfile(ttft_s=0.15, tokens_per_s=320.0, answer_tokens=80),
}

CONFIG = """\
backends:
  diffusiongemma: {{kind: openai, model: google/diffusiongemma-26B-A4B-it, base_url: "{sim}", decoding: diffusion,
                   latency: {{canvas_ms: 120}}, max_retries: 0}}
  gemma-box: {{kind: openai, model: gemma-3-27b-it, base_url: "{sim}", max_retries: 0}}  # the faster local one
  mercury-2: {{kind: openai, model: mercury-2, base_url: "{sim}", decoding: diffusion,
              price: {{input: 0.25, output: 0.75}}, rpm: 60, tpm: 200000}}
  frontier: {{kind: openai, model: claude-sonnet-4-5, base_url: "{sim}", price: {{input: 3.0, output: 15.0}}}}
  glm: {{kind: openai, model: glm-5.2, base_url: "{sim}", price: {{input: 0.6, output: 2.2}}}}
  kimi: {{kind: openai, model: k2.6, base_url: "{sim}", price: {{input: 0.6, output: 2.5}}}}
routing:
  scorer: {{kind: learned}}
  deadline_ms: 8000
  tiers:
    - {{name: local, below: 0.3, backends: [gemma-box, diffusiongemma]}}
    - {{name: fast-hosted, below: 0.55, backends: [mercury-2]}}
    - {{name: frontier, backends: [frontier]}}
  breaker: {{failures: 3, cooldown_ms: 600000}}
consortia:
  cns-glm: {{members: ["glm*3"], arbiter: mercury-2, judging: rank, quorum: 2, grace_s: 0.3, retries: 0}}
  cns-kimi: {{members: ["kimi*3"], arbiter: mercury-2, judging: rank}}
  cns-meta: {{members: [cns-glm, cns-kimi], arbiter: mercury-2, judging: synthesis}}
aliases:
  claude-*: auto
server:
  keys:
    alice: {{key: "${{ALICE_ROUTE_KEY}}", rpm: 120}}
    ci: {{key: "${{CI_ROUTE_KEY}}", rpm: 30, tpm: 100000}}
"""

EASY = ["hi!", "Thanks, that works.", "What is 2+2?", "Translate 'good morning' to French.", "Name a prime number."]
MEDIUM = ["Summarise the difference between TCP and UDP for a new engineer, in four bullet points with one example each.",
          "Write a Python function that removes duplicates from a list while keeping the order, and explain its cost."]
HARD = ["Prove that there are infinitely many primes of the form 4k+3, then explain step by step where the argument "
        "fails for primes of the form 4k+1 and what extra tool (quadratic residues) fixes it. Give a full, rigorous proof "
        "with every lemma stated, and analyse the time complexity of any algorithm you use along the way. " * 2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"route serve exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("route serve did not come up within 60 s")


def _chat(client: httpx.Client, key: str, model: str, prompt: str, max_tokens: int = 120) -> int:
    # Streamed, as editors and agents ask: the first token's time is then measured, not the whole answer's.
    return client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, json={
        "model": model, "max_tokens": max_tokens, "stream": True,
        "messages": [{"role": "user", "content": prompt}]}).status_code


def _messages(client: httpx.Client, key: str, prompt: str) -> int:
    return client.post("/v1/messages", headers={"x-api-key": key}, json={
        "model": "claude-sonnet-4-5", "max_tokens": 120, "stream": True,
        "messages": [{"role": "user", "content": prompt}]}).status_code


def traffic(base: str, sim: SimServer, alice: str, ci: str, pause_s: float) -> None:
    """A small team's requests in six rounds, `pause_s` apart (so the cost chart has some history)."""
    with httpx.Client(base_url=base, timeout=60) as client:
        rounds = [
            lambda: [_chat(client, alice, "auto", prompt) for prompt in EASY[:3]],
            lambda: [_messages(client, ci, MEDIUM[0]), _chat(client, alice, "auto", HARD[0], 200)],
            lambda: [_chat(client, ci, "frontier", MEDIUM[1]), _chat(client, alice, "auto", EASY[3])],
            lambda: [sim.set_faults("glm-5.2", [None, "500"]),  # one member of the nested run is lost (no retries)
                     _chat(client, alice, "cns-meta", "Explain CRDTs in five lines.", 80)],
            lambda: [_chat(client, alice, "cns-glm", "Which sorting algorithm suits nearly sorted data?", 80),
                     _messages(client, ci, MEDIUM[1]), _chat(client, alice, "auto", HARD[0], 160)],
            lambda: _local_engine_falls_over(client, sim, alice, ci),
        ]
        for i, one_round in enumerate(rounds):
            if i:
                time.sleep(pause_s)
            one_round()
        for verdict in ("good", "good", "bad"):
            client.post("/v1/feedback", headers={"authorization": f"Bearer {alice}"}, json={"id": "1", "verdict": verdict})


def _local_engine_falls_over(client: httpx.Client, sim: SimServer, alice: str, ci: str) -> None:
    """A routed request falls back to the other local backend, two asking for the engine by name
    fail, and after three failures in a row its breaker opens: routing passes it over."""
    sim.set_faults("google/diffusiongemma-26B-A4B-it", ["500", "500", "500"])
    _chat(client, alice, "auto", EASY[4])
    for prompt in ("Name a prime number.", "Spell 'latency'."):
        _chat(client, ci, "diffusiongemma", prompt)
    for prompt in (EASY[0], EASY[2]):
        _chat(client, alice, "auto", prompt)


def shoot(url: str, key: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Debian's chromium: apt-get install chromium")
    shots: list[Path] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="route-ui-chromium-") as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=chromium, headless=True, args=FLAGS,
                                                       viewport=VIEWPORT, color_scheme="light", device_scale_factor=1)
        page = context.new_page()
        page.goto(f"{url}/ui")
        page.locator("#login-form").wait_for()
        shots.append(_save(page.locator("#login .card"), out / "web-view-sign-in.png"))
        page.fill("#key", key)
        page.click("#login-form button")
        page.locator("#request-rows tr[data-seq]").first.wait_for()
        page.locator(".run").first.wait_for()
        page.locator("#learning .card").first.wait_for()
        for panel in ("requests", "backends", "consortia", "cost", "learning"):
            shots.append(_save(page.locator(f"#{panel}"), out / f"web-view-{panel}.png"))
        page.locator("#request-rows tr[data-seq]").first.click()
        page.locator("#detail-body .detail").wait_for()
        shots.append(_save(page.locator("#detail"), out / "web-view-request.png"))
        page.keyboard.press("Escape")
        page.emulate_media(color_scheme="dark")
        page.evaluate("window.scrollTo(0, 0)")
        path = out / "web-view-dark.png"
        page.screenshot(path=str(path))
        shots.append(path)
        context.close()
    return shots


def _save(locator, path: Path) -> Path:
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "images"), help="folder for the PNGs")
    parser.add_argument("--pause", type=float, default=8.0, help="seconds between rounds of traffic")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="route-ui-shots-"))
    alice, ci = secrets.token_hex(20), secrets.token_hex(20)
    env = {**os.environ, "ROUTE_HOME": str(tmp / "home"), "ALICE_ROUTE_KEY": alice, "CI_ROUTE_KEY": ci,
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with SimServer(PROFILES) as sim:
        config = tmp / "route.yaml"
        config.write_text(CONFIG.format(sim=sim.base_url))
        port = _free_port()
        log = tmp / "serve.log"
        proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(config)],
                                env=env, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait(f"{url}/healthz", proc, log)
            traffic(url, sim, alice, ci, args.pause)
            shots = shoot(url, alice, out)
            print("\n".join(str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p) for p in shots))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
