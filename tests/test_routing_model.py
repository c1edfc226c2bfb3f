"""One routing model, read by every decision path: a version learning adopts routes what `route
serve` decides next -- plain and streamed, for new sessions and for sessions that started
before it (which move up when the new version places their task higher, and never down) --
and each decision names the version that made it (the `x-route-version` header, the request
log). Through the real server on loopback, with the simulator as both tiers.

Before the model was one object, sessions kept the scorer and tiers the Router was built with,
so an installed version routed nothing the server decided (issue 36).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest

from policies.complexity import Weights
from router.config_loader import load_config
from router.core import Router
from router.learning import open_store
from router.server import RouteServer
from router.server.keys import server_keys
from router.store import Store

pytestmark = pytest.mark.integration

EASY = "hi there"


def _config(sim, tmp_path: Path) -> dict[str, Any]:
    def backend(model: str) -> dict[str, Any]:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0}

    return {"backends": {"light": backend("m-light"), "heavy": backend("m-heavy")},
            "routing": {"tiers": [{"name": "light", "below": 0.5, "backends": ["light"]},
                                  {"name": "heavy", "backends": ["heavy"]}],
                        "learn": {"refresh_ms": 3_600_000}},  # versions arrive when the test says
            "log": {"path": str(tmp_path / "route.db")}}  # fmt: skip


def _adopt(router: Router, bias: float, parent: int) -> int:
    """A version whose scorer sends every prompt up (bias > 0) or down, installed as a running
    router finds it: in the store, then the learner's refresh."""
    base = Weights.load()
    learned = dataclasses.replace(base, bias=base.bias + bias)
    store = open_store(router.config)
    try:
        version = store.adopt(parent, 0, learned.to_json(), seen=0, heads={}, summary={})
    finally:
        store.close()
    assert version is not None and router.learner is not None
    asyncio.run(router.learner.refresh())
    assert router.learner.version == version and router.model.version == version
    return version


def _chat(client: httpx.Client, prompt: str, session: str | None = None, *, stream: bool = False) -> httpx.Response:
    headers = {"x-session-id": session} if session else {}
    body = {"model": "auto", "messages": [{"role": "user", "content": prompt}], "stream": stream}
    if stream:
        with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as answer:
            answer.read()
            return answer
    return client.post("/v1/chat/completions", json=body, headers=headers)


def _decided(answer: httpx.Response) -> tuple[str, str]:
    assert answer.status_code == 200, answer.text
    return answer.headers["x-route-tier"], answer.headers["x-route-version"]


def test_an_adopted_version_routes_what_route_serve_decides_next(sim, tmp_path):
    router = Router(load_config(_config(sim, tmp_path)), source="server")
    with RouteServer(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        assert _decided(_chat(client, EASY, "before")) == ("light", "0")
        assert _decided(_chat(client, EASY, "stays-up")) == ("light", "0")
        up = _adopt(router, +20.0, 0)  # every prompt now scores ~1: heavy
        for stream in (False, True):
            assert _decided(_chat(client, EASY, f"new-{stream}", stream=stream)) == ("heavy", str(up))
            assert _decided(_chat(client, EASY, stream=stream)) == ("heavy", str(up))  # a derived session
        # a session placed before the version moves up with it
        assert _decided(_chat(client, EASY + " again", "before")) == ("heavy", str(up))
        assert _decided(_chat(client, EASY, "stays-up")) == ("heavy", str(up))
        down = _adopt(router, -20.0, up)  # every prompt now scores ~0: light
        for stream in (False, True):
            assert _decided(_chat(client, EASY, f"newer-{stream}", stream=stream)) == ("light", str(down))
        # ... and never down: the session it moved up keeps its tier under a lower version
        assert _decided(_chat(client, EASY + " once more", "stays-up")) == ("heavy", str(down))
        router.request_log.flush(timeout_s=5.0)
    rows = Store(tmp_path / "route.db").recent(50)
    versions = [(row["tier"], row["decision"]["version"]) for row in reversed(rows)]
    assert versions[:2] == [("light", 0), ("light", 0)]
    assert versions[2:8] == [("heavy", up)] * 6
    assert versions[8:] == [("light", down), ("light", down), ("heavy", down)]


def test_explain_with_and_without_a_session_reads_the_same_version(sim, tmp_path):
    router = Router(load_config(_config(sim, tmp_path)))
    assert router.explain(EASY).tier == router.explain(EASY, session="s1").tier == "light"
    up = _adopt(router, +20.0, 0)
    plain, session = router.explain(EASY), router.explain(EASY, session="s2")
    assert (plain.tier, plain.version) == (session.tier, session.version) == ("heavy", up)
    asyncio.run(router.aclose())


# -- learning no single key can steer ------------------------------------------------------

ALICE, BOB, CAROL, OPS = ("alice-key-0123456789abcdef", "bob-key-0123456789abcdef", "carol-key-0123456789abcdef",
                          "ops-key-0123456789abcdef")


@pytest.fixture
def keys(monkeypatch):
    for name, value in (("ALICE_KEY", ALICE), ("BOB_KEY", BOB), ("CAROL_KEY", CAROL), ("OPS_KEY", OPS)):
        monkeypatch.setenv(name, value)


def _learning_config(sim, tmp_path: Path) -> dict[str, Any]:
    config = _config(sim, tmp_path)
    config["routing"]["scorer"] = {"kind": "learned"}
    config["routing"]["learn"] = {"auto": True, "refit_every": 10, "refresh_ms": 3_600_000}
    # a generous limit, so every verdict of the flood lands: the cap per key is what must hold
    config["server"] = {"feedback_rpm": 10_000,
                        "keys": {"alice": {"key": "${ALICE_KEY}"}, "bob": {"key": "${BOB_KEY}"},
                                 "carol": {"key": "${CAROL_KEY}"}, "ops": {"key": "${OPS_KEY}", "admin": True}}}
    return config


def _as(client: httpx.Client, key: str, prompt: str) -> httpx.Response:
    answer = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                         json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
    assert answer.status_code == 200, answer.text
    return answer


def _judge_all(router: Router, client: httpx.Client, key: str, verdicts: dict[str, str]) -> None:
    """`key` asks each prompt, then judges each answer as `verdicts` says."""
    for prompt in verdicts:
        _as(client, key, prompt)
    assert router.request_log is not None
    router.request_log.flush(timeout_s=5.0)
    name = next(n for n, k in (("alice", ALICE), ("bob", BOB), ("carol", CAROL), ("ops", OPS)) if k == key)
    rows = Store(router.loaded.config.log.path).recent(1000)
    ids = {row["prompt"]: row["id"] for row in rows if row["key_name"] == name}
    for prompt, verdict in verdicts.items():
        judged = client.post("/v1/feedback", headers={"authorization": f"Bearer {key}"},
                             json={"id": ids[prompt], "verdict": verdict})
        assert judged.status_code == 200, judged.text


def _learn(router: Router) -> None:
    """What a running router does every refresh: import the verdicts, refit what is due."""
    assert router.learner is not None

    async def once() -> None:
        await router.learner.refresh()
        await router.learner.drain()
        await router.learner.refresh()  # a version adopted by the refit, installed

    asyncio.run(once())


POEM, CHORE = "Write a haiku about autumn leaves.", "Refactor the parser in utils.py to use a dataclass"


def test_a_flood_of_verdicts_from_two_keys_adopts_nothing_but_an_admins_verdicts_can(sim, tmp_path, keys):
    router = Router(load_config(_learning_config(sim, tmp_path)), source="server")
    easy = [f"hi there, how are you today, friend number {i}?" for i in range(71)]
    chores = [f"Refactor function {i} in utils.py to use a dataclass" for i in range(70)]
    poems = [f"Write a haiku about autumn leaves, number {i}." for i in range(60)]
    with RouteServer(router, api_keys=server_keys(router.loaded, "127.0.0.1", None)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as client:
        greeting = _as(client, CAROL, easy[70]).headers
        # two keys teach that greetings need the strong model and refactorings do not: 141 verdicts,
        # as consistent as labels get (without the cap per key, they are adopted)
        _judge_all(router, client, ALICE, dict.fromkeys(easy[:35], "bad") | dict.fromkeys(chores[:35], "good"))
        _judge_all(router, client, BOB, dict.fromkeys(easy[35:70], "bad") | dict.fromkeys(chores[35:], "good")
                   | {"Refactor the lexer to use a dataclass": "good"})
        _learn(router)
        assert router.learner is not None and router.learner.version == 0, router.learner.counts.last_refit
        again = _as(client, CAROL, easy[70]).headers  # another user's routing: as before
        assert [again[h] for h in ("x-route-version", "x-route-tier", "x-route-score")] == \
            [greeting[h] for h in ("x-route-version", "x-route-tier", "x-route-score")]
        assert router.learner.store.usable_counts(8) == {0: 16}  # 8 of each key's 70-odd labels
        before = {p: float(_as(client, CAROL, p).headers["x-route-score"]) for p in (POEM, CHORE)}
        assert before[CHORE] > before[POEM]  # as shipped, the refactoring looks the harder of the two
        # the operator's admin key says the light model's haiku were not good enough, its refactorings were
        _judge_all(router, client, OPS, dict.fromkeys(poems, "bad") | dict.fromkeys(chores[:60], "good"))
        _learn(router)
        assert router.learner.version >= 1, router.learner.counts.last_refit
        after = {p: _as(client, CAROL, p).headers for p in (POEM, CHORE)}
        assert after[POEM]["x-route-version"] == str(router.learner.version)
        assert float(after[POEM]["x-route-score"]) > float(after[CHORE]["x-route-score"])
