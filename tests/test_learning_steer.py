"""The operator steers what routing learns, and sees what it did (issue 48), through `route
serve`'s app on a loopback port with the shipped config's three tiers, every backend answered
by the simulator, and `routing.learn: {auto: true}` with the default bounds.

- An admin's verdicts move the kind of prompt they name: 60 arithmetic word problems the local
  tier answered "bad", 90 chit-chat answers "good", and fresh arithmetic prompts (none of the
  labelled ones) go above the local tier while fresh chit-chat stays; `route learn status` says
  what the refit did, on how many usable labels, and the traffic it moved.
- The same move learned from shadow judgements waits for `route learn adopt` (it moves more of
  the logged traffic than `max_moved`), and a version adopted or rolled back to from the CLI
  decides the very next request, with no refresh in between (`x-route-version`).
- `route learn status` counts the labels a refit reads: a non-admin key's flood beyond its cap
  does not move the figure.
- In a Redis fleet, every replica takes an adopted version and a rollback with no request and
  no refresh: each replica's store watches the fleet's version in a thread of its own.

Internals touched: `router.learner.refresh()` and `drain()` (what a running router does every
`refresh_ms`, called when the test says instead of waiting for the clock) and the store, to
add the shadow labels a judge would have made.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from router.cli.app import app
from router.config_loader import load_config
from router.core import Router
from router.learning import learn_status, open_store
from router.learning.store import NewLabel
from router.server import RouteServer
from router.server.keys import server_keys
from router.server.ui.learning import learning_panel
from router.simulator import Simulator
from router.store import Store

pytestmark = pytest.mark.integration

runner = CliRunner()
OPS = "ops-key-0123456789abcdef"  # an admin key: the operator's own verdicts
ALICE = "alice-key-0123456789abcdef"

NAMES = ["Maria", "Tom", "Aisha", "Kenji", "Lena", "Omar", "Priya", "Diego", "Sara", "Ivan", "Nora", "Ben"]
ITEMS = ["apples", "pencils", "marbles", "stickers", "cookies", "books", "oranges", "cards", "shells", "coins"]
GREETINGS = ["hi there", "good morning", "hey", "hello again", "thanks so much", "ok cool", "haha nice one",
             "have a great weekend", "cheers mate", "good night", "what's up", "bye for now"]
FOLLOWS = ["how are you today?", "hope your day is going well", "that was fun", "talk later", "nice to meet you",
           "just saying hello", "you made me smile", "see you soon", "all good here", "lol"]


def arithmetic(rng: random.Random) -> str:
    n, m, it = rng.choice(NAMES), rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(3, 90), rng.randint(2, 40), rng.randint(2, 9)
    return rng.choice([
        f"{n} has {a} {it}. {m} gives {n} {b} more, then {n} shares them equally among {c} friends. "
        f"How many {it} does each friend get?",
        f"A shop sells {it} at ${c} each. {n} buys {a} {it} and pays with ${a * c + b}. How much change does {n} get?",
        f"{n} reads {b} pages a day. The book has {a * c} pages. After {c} days, how many pages are left to read?",
        f"There are {a} {it} in a box. {n} takes {b} and {m} adds {c} times as many as {n} took. "
        f"How many {it} are in the box now?",
        f"{n} earns ${a} per week and saves {c} dollars of it each day for {b} days. How much has {n} saved?",
        f"A train travels {a} miles in {c} hours. At the same speed, how far does it go in {b} hours?",
    ])  # fmt: skip


def chitchat(rng: random.Random) -> str:
    return f"{rng.choice(GREETINGS)}, {rng.choice(FOLLOWS)} {rng.choice(['', ':)', '!', rng.choice(NAMES)])}".strip()


def _distinct(make: Any, rng: random.Random, n: int, avoid: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    out: list[str] = []
    while len(out) < n:
        prompt = make(rng)
        if prompt not in avoid and prompt not in out:
            out.append(prompt)
    return out


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPS_KEY", OPS)
    monkeypatch.setenv("ALICE_KEY", ALICE)


@pytest.fixture
def simulator():
    """The shipped config's three models, answering at once: what is tested is routing, not latency."""
    with Simulator({model: {} for model in ("google/diffusiongemma-26B-A4B-it", "mercury-2", "claude-sonnet-4-5")}) as sim:
        yield sim


def _config(sim: Simulator, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The shipped config on the simulator, learning on with its defaults, written to a file
    (for the CLI) as well."""
    config = sim.config()
    config["routing"]["learn"] = {"auto": True}
    config["log"] = {"path": str(tmp_path / "route.db")}
    config["server"] = {**(config.get("server") or {}), "feedback_rpm": 10_000,
                        "keys": {"ops": {"key": "${OPS_KEY}", "admin": True}, "alice": {"key": "${ALICE_KEY}"}}}
    path = tmp_path / "route.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return config, path


def _ask(client: httpx.Client, prompt: str, key: str = OPS) -> httpx.Response:
    answer = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                         json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
    assert answer.status_code == 200, answer.text
    return answer


def _judge(router: Router, client: httpx.Client, verdicts: dict[str, str], key: str = OPS) -> None:
    assert router.request_log is not None
    router.request_log.flush(timeout_s=5.0)
    ids = {row["prompt"]: row["id"] for row in Store(router.loaded.config.log.path).recent(5000)}
    for prompt, verdict in verdicts.items():
        judged = client.post("/v1/feedback", headers={"authorization": f"Bearer {key}"},
                             json={"id": ids[prompt], "verdict": verdict})
        assert judged.status_code == 200, judged.text


def _learn(router: Router) -> None:
    """What a running router does every `refresh_ms`: import the verdicts, refit what is due."""
    assert router.learner is not None

    async def once() -> None:
        await router.learner.refresh()
        await router.learner.drain()

    asyncio.run(once())


def _above_local(client: httpx.Client, prompts: list[str]) -> float:
    return sum(_ask(client, p).headers["x-route-tier"] != "local" for p in prompts) / len(prompts)


def test_an_admins_verdicts_move_arithmetic_above_the_local_tier_and_status_says_so(simulator, tmp_path, keys):
    config, path = _config(simulator, tmp_path)
    router = Router(load_config(config), source="server")
    rng = random.Random(48)
    asked = _distinct(arithmetic, rng, 90)
    chat = _distinct(chitchat, rng, 90)
    with RouteServer(router, api_keys=server_keys(router.loaded, "127.0.0.1", None)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        local = [p for p in asked if _ask(client, p).headers["x-route-tier"] == "local"]
        assert len(local) >= 60, len(local)  # as shipped, most arithmetic stays local
        for p in chat:
            assert _ask(client, p).headers["x-route-tier"] == "local"
        fresh_sums = _distinct(arithmetic, random.Random(7), 100, set(asked))
        fresh_chat = _distinct(chitchat, random.Random(7), 100, set(chat))
        start = _above_local(client, fresh_sums), 1 - _above_local(client, fresh_chat)
        assert start[0] < 0.5  # the scenario's start: well short of the target
        _judge(router, client, dict.fromkeys(local[:60], "bad") | dict.fromkeys(chat, "good"))
        _learn(router)
        assert router.learner is not None and router.learner.version >= 1, router.learner.counts.last_refit
        end = _above_local(client, fresh_sums), 1 - _above_local(client, fresh_chat)
        print(f"\nfresh arithmetic above the local tier {start[0]:.0%} -> {end[0]:.0%}; "
              f"fresh chit-chat local {start[1]:.0%} -> {end[1]:.0%} (version {router.learner.version})")
        assert end[0] >= 0.8 and end[1] >= 0.8
    asyncio.run(router.aclose())
    found = learn_status(load_config(config).config)
    refit = found["boundaries"][0]["last_refit"]
    assert refit["outcome"] == "adopted" and refit["labels_used"] == 150 and found["labels"]["total"] == 150
    moved = refit["moved"]
    assert moved["up"] >= 40 and moved["moves"].get("local→fast-hosted", 0) >= 40, moved
    assert moved["keys"] == {"ops": moved["changed"]}  # whose traffic moves: the admin's own
    shown = runner.invoke(app, ["learn", "status", "-c", str(path)])
    assert shown.exit_code == 0, shown.output
    print(shown.stdout)  # what the operator reads (pytest -s shows it)
    assert "last refit " in shown.stdout and "adopted as version" in shown.stdout
    assert f"traffic moved: {moved['changed']} of the last {moved['requests']} requests change tier" in shown.stdout
    assert "on 150 usable labels" in shown.stdout and "placement gain" in shown.stdout
    # ... and the web view's learning panel says the same
    facts = {f["label"]: f for s in learning_panel(router)["sections"] for f in s["facts"]}
    assert facts["local|fast-hosted: last refit"]["value"].startswith("adopted (version ")
    assert facts["local|fast-hosted: traffic moved"]["value"] == refit["moves"]
    assert facts["local|fast-hosted: labels used"]["value"] == 150


def _shadow_labels(router: Router, sums: list[str], chat: list[str]) -> None:
    """What a judge comparing the tiers' answers would have said: the upper tier's arithmetic
    better, the chit-chat a tie."""
    store = open_store(router.config)
    try:
        store.add_labels([NewLabel(0, "shadow", f"shadow:0:{i}", p, 0.0, 1.0) for i, p in enumerate(sums)]
                         + [NewLabel(0, "shadow", f"shadow:0:c{i}", p, 1.0, 1.0) for i, p in enumerate(chat)])
    finally:
        store.close()


def test_a_move_shadow_judging_would_make_waits_for_adopt_and_versions_apply_from_the_next_request(
        simulator, tmp_path, keys):
    config, path = _config(simulator, tmp_path)
    router = Router(load_config(config), source="server")
    rng = random.Random(4)
    sums, chat = _distinct(arithmetic, rng, 60), _distinct(chitchat, rng, 90)
    with RouteServer(router, api_keys=server_keys(router.loaded, "127.0.0.1", None)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        for p in sums[:40] + chat[:40]:
            _ask(client, p)
        assert router.request_log is not None
        router.request_log.flush(timeout_s=5.0)
        _shadow_labels(router, sums, chat)
        _learn(router)
        assert router.learner is not None and router.learner.version == 0  # not adopted: it waits
        refit = learn_status(load_config(config).config)["boundaries"][0]["last_refit"]
        assert refit["outcome"] == "waiting" and refit["moved"]["share"] > 0.1, refit
        shown = runner.invoke(app, ["learn", "status", "-c", str(path)])
        assert "waiting (`route learn adopt` adopts it)" in shown.stdout, shown.output
        probe = sums[0]
        assert _ask(client, probe).headers["x-route-version"] == "0"
        adopted = runner.invoke(app, ["learn", "adopt", "-c", str(path)])
        assert adopted.exit_code == 0, adopted.output
        # the very next request, with no refresh in between, is decided by the adopted version
        after = _ask(client, probe).headers
        assert (after["x-route-version"], after["x-route-tier"] != "local") == ("1", True)
        back = runner.invoke(app, ["learn", "rollback", "0", "-c", str(path)])
        assert back.exit_code == 0, back.output
        assert _ask(client, probe).headers["x-route-version"] == "0"  # ... and by the restored one
        again = runner.invoke(app, ["learn", "adopt", "-c", str(path)])
        assert again.exit_code == 2 and "no refit is waiting" in again.output
    asyncio.run(router.aclose())


def test_learn_status_counts_the_labels_a_refit_reads_so_a_keys_flood_does_not_move_it(simulator, tmp_path, keys):
    config, _ = _config(simulator, tmp_path)
    loaded = load_config(config).config
    store = open_store(loaded)
    try:
        store.add_labels([NewLabel(0, "feedback", f"0:f{i}", f"prompt {i}", 1.0, 1.0, "ops", True) for i in range(5)])
        flood = [NewLabel(0, "feedback", f"0:a{i}", f"flood {i}", 0.0, 1.0, "alice", False) for i in range(300)]
        store.add_labels(flood[:20])
        first = learn_status(loaded)["labels"]
        store.add_labels(flood[20:])
        then = learn_status(loaded)["labels"]
    finally:
        store.close()
    cap = loaded.routing.learn.max_labels_per_key  # type: ignore[union-attr]
    assert first["total"] == then["total"] == 5 + cap
    assert (first["stored"], then["stored"]) == (25, 305)  # what is kept, said apart


def _replica_config(url: str, tmp_path: Path) -> dict[str, Any]:
    def backend(model: str) -> dict[str, Any]:
        return {"kind": "openai", "model": model, "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}

    return {"backends": {"low": backend("m-low"), "top": backend("m-top")},
            "routing": {"tiers": [{"name": "low", "below": 0.5, "backends": ["low"]},
                                  {"name": "top", "backends": ["top"]}],
                        "learn": {"refresh_ms": 50}},
            "state": {"backend": "redis", "url": url},
            "log": {"enabled": False, "path": str(tmp_path / "route.db")}}  # fmt: skip


def _until(read: Any, want: Any) -> Any:
    """`read()` until it gives `want` (a replica's watch thread reads the fleet's version every
    refresh_ms), at most 10 s; what it last gave."""
    import time

    deadline = time.monotonic() + 10
    while (found := read()) != want and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def test_every_replica_of_a_fleet_takes_a_version_and_a_rollback_with_no_traffic(tmp_path, redis_server):
    import dataclasses

    from policies.complexity import Weights
    from router.learning.status import rollback

    config = _replica_config(redis_server.url, tmp_path)
    replicas = [Router(load_config(config)), Router(load_config(config))]
    assert [r.model.version for r in replicas] == [0, 0]
    base = Weights.load()
    store = open_store(replicas[0].config)
    try:
        version = store.adopt(0, 0, dataclasses.replace(base, bias=base.bias + 20).to_json(), seen=0, heads={},
                              summary={})
    finally:
        store.close()
    # no request, no refresh: each replica's next decision reads the version the fleet adopted
    for router in replicas:
        assert _until(lambda r=router: r.model.version, version) == version
        assert router.explain("hi there").tier == "top"
    rollback(load_config(config).config, 0)
    for router in replicas:
        assert _until(lambda r=router: r.model.version, 0) == 0
        assert router.explain("hi there").tier == "low"
    for router in replicas:
        asyncio.run(router.aclose())


def test_a_kept_refit_says_why_on_how_many_usable_labels_and_that_it_moves_nothing(simulator, tmp_path, keys):
    config, path = _config(simulator, tmp_path)
    router = Router(load_config(config), source="server")
    rng = random.Random(9)
    store = open_store(router.config)
    try:  # an admin's verdicts, too few of them bad to tell a better routing from luck
        store.add_labels([NewLabel(0, "feedback", f"0:a{i}", p, 0.0, 1.0, "ops", True)
                          for i, p in enumerate(_distinct(arithmetic, rng, 30))]
                         + [NewLabel(0, "feedback", f"0:c{i}", p, 1.0, 1.0, "ops", True)
                            for i, p in enumerate(_distinct(chitchat, rng, 30))])
    finally:
        store.close()
    _learn(router)
    asyncio.run(router.aclose())
    refit = learn_status(load_config(config).config)["boundaries"][0]["last_refit"]
    assert (refit["outcome"], refit["labels_used"], refit["moves"]) == ("kept", 60, "none: the version in use stays")
    assert "30 of the labels show the tiers' answers differ; judging needs 40" in refit["reason"]
    shown = runner.invoke(app, ["learn", "status", "-c", str(path)]).stdout
    assert "kept, on 60 usable labels" in shown and "why: 30 of the labels" in shown, shown
