"""Who may give feedback, and on what: the labels routing learns from must not be poisoned.

Each request record carries the name of the client key that sent it (never the key); a key may
judge only its own requests, an admin key (`server.keys.NAME.admin: true`, or the
`--api-key-env` key) any; only requests the log holds; at most `server.feedback_rpm` verdicts a
minute per key (each limiter's clock frozen here, so the counts are exact); and a server
without a request log (`--no-log`) records none and creates no file. Through the real server on
loopback and the real CLI.
"""

from __future__ import annotations

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from router.cli.app import app
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.server.keys import server_keys
from router.store import Store

pytestmark = pytest.mark.integration

ALICE, BOB, OPS = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef", "ops-key-0123456789abcdef"
NOW = 1_000.0


def _config(tmp_path, sim, *, feedback_rpm: int | None = None, log: dict | None = None) -> dict:
    server: dict = {"keys": {"alice": {"key": "${ALICE_KEY}"}, "bob": {"key": "${BOB_KEY}"},
                             "ops": {"key": "${OPS_KEY}", "admin": True}}}
    if feedback_rpm is not None:
        server["feedback_rpm"] = feedback_rpm
    return {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url, "max_retries": 0}},
            "routing": {"tiers": [{"name": "only", "backends": ["small"]}]},
            "log": log if log is not None else {"path": str(tmp_path / "route.db")}, "server": server}


@pytest.fixture
def keys(monkeypatch):
    for name, value in (("ALICE_KEY", ALICE), ("BOB_KEY", BOB), ("OPS_KEY", OPS)):
        monkeypatch.setenv(name, value)


def _serve(router: Router) -> RouteServer:
    return RouteServer(router, api_keys=server_keys(router.loaded, "127.0.0.1", None))


def _ask(client: httpx.Client, key: str, prompt: str = "hi there") -> None:
    answer = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                         json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
    assert answer.status_code == 200, answer.text


def _judge(client: httpx.Client, key: str, request_id, verdict: str = "bad") -> httpx.Response:
    return client.post("/v1/feedback", headers={"authorization": f"Bearer {key}"},
                       json={"id": request_id, "verdict": verdict})


def _ids_by_prompt(router: Router, path) -> dict[str, int]:
    assert router.request_log is not None and router.request_log.flush()
    return {row["prompt"]: row["id"] for row in Store(path).recent(100)}


def test_each_record_names_the_key_that_sent_it_and_never_holds_the_key(sim, tmp_path, keys):
    router = Router(load_config(_config(tmp_path, sim)), source="server")
    with _serve(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        _ask(client, ALICE, "from alice")
        _ask(client, BOB, "from bob")
        ids = _ids_by_prompt(router, tmp_path / "route.db")
    rows = {row["prompt"]: row for row in Store(tmp_path / "route.db").recent(10)}
    assert rows["from alice"]["key_name"] == "alice" and rows["from bob"]["key_name"] == "bob"
    assert set(ids) == {"from alice", "from bob"}
    dump = (tmp_path / "route.db").read_bytes() + (tmp_path / "route.db-wal").read_bytes()
    assert ALICE.encode() not in dump and BOB.encode() not in dump


def test_a_key_judges_only_its_own_requests_and_an_admin_key_any(sim, tmp_path, keys):
    router = Router(load_config(_config(tmp_path, sim)), source="server")
    with _serve(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        _ask(client, ALICE, "alice asks")
        alices = _ids_by_prompt(router, tmp_path / "route.db")["alice asks"]
        not_yours = _judge(client, BOB, alices)
        own = _judge(client, ALICE, alices, "good")
        admin = _judge(client, OPS, alices, "bad")
    assert not_yours.status_code == 403, not_yours.text
    assert "alice" not in not_yours.text and "only on requests made with it" in not_yours.json()["error"]["message"]
    assert own.status_code == 200 and own.json() == {"recorded": True}
    assert admin.status_code == 200, admin.text
    # One verdict per request: the admin's replaced alice's, and bob's never counted.
    verdicts = Store(tmp_path / "route.db").feedback_rows()
    assert [(v["request"], v["verdict"], v["giver"]) for v in verdicts] == [(str(alices), "bad", "ops")]


def test_feedback_on_a_request_that_does_not_exist_is_refused(sim, tmp_path, keys):
    cfg = tmp_path / "route.yaml"
    cfg.write_text(yaml.safe_dump(_config(tmp_path, sim)))
    Store(tmp_path / "route.db").close()  # an empty log
    cli = CliRunner().invoke(app, ["feedback", "999", "good", "-c", str(cfg)])
    assert cli.exit_code == 2, cli.output
    assert "no request 999" in cli.output and "route log" in cli.output
    router = Router(load_config(str(cfg)), source="server")
    with _serve(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        missing = _judge(client, OPS, 999)
        by_trace = _judge(client, OPS, "no-such-trace")
    assert missing.status_code == 404 and "no request 999" in missing.json()["error"]["message"]
    assert by_trace.status_code == 404
    assert Store(tmp_path / "route.db").feedback_rows() == []


def test_feedback_is_rate_limited_per_key(sim, tmp_path, keys):
    router = Router(load_config(_config(tmp_path, sim, feedback_rpm=2)), source="server")
    router.verdicts.gate.clock = lambda: NOW  # no refill while the test runs: the counts are exact
    with _serve(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        _ask(client, ALICE, "alice asks")
        _ask(client, BOB, "bob asks")
        ids = _ids_by_prompt(router, tmp_path / "route.db")
        alice = [_judge(client, ALICE, ids["alice asks"], verdict) for verdict in ("good", "bad", "good", "bad")]
        bob = _judge(client, BOB, ids["bob asks"], "good")
    assert [r.status_code for r in alice] == [200, 200, 429, 429]
    assert alice[2].headers["retry-after"] == "30" and "server.feedback_rpm" in alice[2].json()["error"]["message"]
    assert bob.status_code == 200  # another key's allowance is its own
    verdicts = {v["request"]: v["verdict"] for v in Store(tmp_path / "route.db").feedback_rows()}
    assert verdicts == {str(ids["alice asks"]): "bad", str(ids["bob asks"]): "good"}


def test_a_server_without_a_request_log_records_no_feedback_and_creates_no_file(sim, tmp_path, route_home, keys):
    config = _config(tmp_path, sim, log={})  # the default file, in the data dir
    router = Router(load_config(config), source="server", log=False)  # what `route serve --no-log` builds
    with _serve(router) as srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        _ask(client, ALICE)
        refused = _judge(client, ALICE, 1)
    assert refused.status_code == 404 and "--no-log" in refused.json()["error"]["message"]
    assert not list(route_home.rglob("*.db")), sorted(route_home.rglob("*"))
