"""Who sees what in the web view, and its sign-in's edges, over real HTTP: a key that is not an
admin sees only the requests it sent -- in the list, the spend per key, and a request in full
whether from memory or from the request log -- while an admin key sees every key's; /ui/login
holds its body to the API's body timeout (408) and size; wrong keys are throttled per client
address and per key, for the API and the view together, and a right key is let in from an
address that flooded wrong ones. (The rendered page: test_web_view_browser.py.)"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.server.limits import ServerLimits

pytestmark = pytest.mark.integration

KEYS = {"alice": "alice-own-view-key-" + "a" * 24, "bob": "bob-own-view-key-" + "b" * 24,
        "ops": "ops-admin-view-key-" + "o" * 24}
BODY_TIMEOUT_S = 0.5


def _config(sim_url: str) -> dict[str, Any]:
    return {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim_url, "max_retries": 0}},
            "routing": {"tiers": [{"name": "all", "backends": ["small"]}]},
            "server": {"keys": {"alice": {"key": "${VIEW_ALICE}"}, "bob": {"key": "${VIEW_BOB}"},
                                "ops": {"key": "${VIEW_OPS}", "admin": True}},
                       "failed_key_rpm": 3}}


@pytest.fixture
def router(sim, monkeypatch) -> Iterator[Router]:
    for name, key in KEYS.items():
        monkeypatch.setenv(f"VIEW_{name.upper()}", key)
    router = Router(load_config(_config(sim.base_url)), source="server")
    yield router
    router.request_log.flush()


@pytest.fixture
def server(router) -> Iterator[RouteServer]:
    with RouteServer(router, api_keys=KEYS, limits=ServerLimits(body_timeout_s=BODY_TIMEOUT_S)) as srv:
        srv.app.state.key_attempts.clock = lambda: 1000.0  # time stands still: no wrong key is forgiven mid-test
        # A page open before any traffic: the view keeps requests while one polls (live.py).
        assert httpx.get(f"{srv.url}/ui/api/poll", headers={"x-api-key": KEYS["ops"]}, timeout=30).status_code == 200
        yield srv


def _ask(server: RouteServer, name: str, prompt: str) -> None:
    response = httpx.post(f"{server.url}/v1/chat/completions", headers={"authorization": f"Bearer {KEYS[name]}"},
                          json={"model": "auto", "messages": [{"role": "user", "content": prompt}]}, timeout=30)
    assert response.status_code == 200, response.text


def _viewer(server: RouteServer, name: str) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=30)
    assert client.post("/ui/login", json={"key": KEYS[name]}).status_code == 204
    return client


def test_a_key_sees_only_its_own_requests_and_an_admin_sees_every_one(server, sim):
    sim.script("m-small", ["for alice", "for bob", "alice again"])
    _ask(server, "alice", "alice's private question")
    _ask(server, "bob", "bob's private question")
    _ask(server, "alice", "alice asks again")

    alice = _viewer(server, "alice").get("/ui/api/poll", params={"after": 0}).json()
    assert alice["auth"] == {"required": True, "key": "alice", "admin": False}
    assert [(r["seq"], r["key"]) for r in alice["requests"]] == [(3, "alice"), (1, "alice")]
    assert [k["key"] for k in alice["cost"]["keys"]] == ["alice"]
    assert all(set(b["keys"]) <= {"alice"} for b in alice["cost"]["buckets"])
    bob = httpx.get(f"{server.url}/ui/api/poll", headers={"x-api-key": KEYS["bob"]}).json()  # a header, as scripts sign in
    assert [(r["seq"], r["key"]) for r in bob["requests"]] == [(2, "bob")]
    ops = _viewer(server, "ops").get("/ui/api/poll", params={"after": 0}).json()
    assert ops["auth"]["admin"] and [r["key"] for r in ops["requests"]] == ["alice", "bob", "alice"]
    assert {k["key"] for k in ops["cost"]["keys"]} == {"alice", "bob"}


def test_a_request_in_full_is_its_keys_alone_from_memory_and_from_the_log(server, sim):
    sim.script("m-small", ["for alice", "for bob"])
    _ask(server, "alice", "alice's private question")
    _ask(server, "bob", "bob's private question")
    alice, ops = _viewer(server, "alice"), _viewer(server, "ops")
    assert alice.get("/ui/api/request", params={"seq": 1}).json()["prompt"] == "alice's private question"
    assert alice.get("/ui/api/request", params={"seq": 2}).status_code == 404  # bob's, from memory
    bobs = ops.get("/ui/api/request", params={"seq": 2}).json()
    assert bobs["prompt"] == "bob's private question"
    # As another process's request: found in the log by its start, duration and backend -- not for alice.
    row = bobs["row"]
    where = {"seq": 999, "ts": row["ts"], "total": row["total_s"], "backend": row["backend"]}
    assert alice.get("/ui/api/request", params=where).status_code == 404
    assert ops.get("/ui/api/request", params=where).json()["prompt"] == "bob's private question"


def _slow_post(server: RouteServer, path: str) -> bytes:
    """A request whose head arrives but whose body stops halfway; what the server answers."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
                     f"x-api-key: {KEYS['alice']}\r\ncontent-length: 100\r\n\r\n{{\"key\": ".encode())
        answer = b""
        while chunk := conn.recv(65536):  # to the end: the server closes the connection
            answer += chunk
    return answer


@pytest.mark.parametrize("path", ["/ui/login", "/v1/chat/completions"])
def test_a_slow_body_is_a_408_and_a_closed_connection_at_login_as_at_the_api(server, path):
    answer = _slow_post(server, path)
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    assert head.startswith(b"http/1.1 408"), answer
    assert b"connection: close" in head


def test_login_refuses_a_body_bigger_than_a_key(server):
    assert httpx.post(f"{server.url}/ui/login", content=b"x" * 5000).status_code == 413


def test_wrong_keys_are_throttled_per_address_and_per_key_and_a_right_key_never_is(server, router):
    wrong = {"authorization": "Bearer not-a-key-" + "z" * 24}
    assert httpx.get(f"{server.url}/v1/models").status_code == 401  # no key presented: no guess, not counted
    assert httpx.get(f"{server.url}/v1/models", headers=wrong).status_code == 401
    assert httpx.post(f"{server.url}/ui/login", json={"key": "not-a-key-" + "y" * 24}).status_code == 401
    assert httpx.get(f"{server.url}/ui/api/poll", headers=wrong).status_code == 401  # three: the limit
    # Guessing stays slow: the flooding address's further wrong keys, at the API and the view alike.
    for guess in (lambda: httpx.get(f"{server.url}/v1/models", headers={"x-api-key": "fresh-guess-" + "q" * 24}),
                  lambda: httpx.post(f"{server.url}/ui/login", json={"key": "another-guess-" + "r" * 24}),
                  lambda: httpx.get(f"{server.url}/ui/api/poll", headers=wrong)):
        refused = guess()
        assert refused.status_code == 429 and refused.headers["retry-after"] == "20", refused.text
    body = httpx.get(f"{server.url}/v1/models", headers=wrong).json()
    assert body["error"]["code"] == "too_many_wrong_keys" and "server.failed_key_rpm" in body["error"]["message"]
    # The neighbour on the same address: its right key is let in at once, at the API and the view.
    assert httpx.get(f"{server.url}/v1/models", headers={"x-api-key": KEYS["ops"]}).status_code == 200
    _ask(server, "alice", "hi after a flood")
    assert _viewer(server, "alice").get("/ui/api/poll").status_code == 200
    assert httpx.get(f"{server.url}/ui/api/poll", headers={"x-api-key": KEYS["bob"]}).status_code == 200
    server.app.state.key_attempts.clock = lambda: 1020.0  # one attempt back, 20 s later
    assert httpx.get(f"{server.url}/v1/models", headers={"x-api-key": "later-guess-" + "s" * 24}).status_code == 401
    assert httpx.get(f"{server.url}/v1/models", headers={"x-api-key": "later-guess-" + "t" * 24}).status_code == 429


def _from(address: str) -> httpx.Client:
    """A client whose connections leave from another loopback address (Linux routes 127/8 to lo)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def test_a_wrong_key_is_counted_for_itself_across_addresses(server):
    stale = {"x-api-key": "a-stale-key-" + "k" * 24}
    with _from("127.0.0.2") as first, _from("127.0.0.3") as second:
        for _ in range(3):
            assert first.get(f"{server.url}/v1/models", headers=stale).status_code == 401
        assert first.get(f"{server.url}/v1/models", headers=stale).status_code == 429  # the address and the key
        assert second.get(f"{server.url}/v1/models", headers=stale).status_code == 429  # the key, from a fresh address
        fresh = {"x-api-key": "another-key-" + "m" * 24}
        assert second.get(f"{server.url}/v1/models", headers=fresh).status_code == 401  # the fresh address is not
        assert second.get(f"{server.url}/v1/models", headers={"x-api-key": KEYS["ops"]}).status_code == 200
