"""The web view's server side (router/server/ui/): signing in with the server's keys, the JSON the
page polls (requests with who sent them and why they went where they did, backends, consortium
timelines, cost, learning), one request in full from the request log, redaction; through the
real app on loopback, routing to the simulated model server. The rendered page itself is
tested in a real browser (test_web_view_browser.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest

from backends.simulator import SimProfile, SimServer
from policies.ladder import Crossing
from router.config_loader import load_config
from router.consortium.simulated import arbiter_responder
from router.core import Router
from router.decision import Attempt
from router.server import RouteServer
from router.server.ui.auth import COOKIE, ViewAuth
from router.server.ui.live import WATCH_S, LiveView, slim_trace
from router.server.ui.reasons import reasons
from router.server.ui.timeline import timeline
from tests.helpers import make_router, ok_outcome

pytestmark = pytest.mark.unit

ALICE = "alice-view-key-" + "a" * 24
CI = "ci-view-key-" + "c" * 24
SECRET = "upstream-secret-" + "s" * 20


# -- signing in ------------------------------------------------------------------------------

def test_a_cookie_names_its_key_without_holding_it_and_cannot_be_forged():
    now = [1000.0]
    auth = ViewAuth({"alice": ALICE, "ci": CI}, lifetime_s=60, clock=lambda: now[0])
    cookie = auth.cookie_for("alice")
    assert ALICE not in cookie and auth.name_of_cookie(cookie) == "alice"
    encoded, expires, mac = cookie.split(".")
    ci_name = auth.cookie_for("ci").split(".")[0]
    assert auth.name_of_cookie(f"{ci_name}.{expires}.{mac}") is None  # alice's MAC does not sign ci
    assert auth.name_of_cookie(f"{encoded}.{int(expires) + 3600}.{mac}") is None  # nor a later expiry
    assert auth.name_of_cookie("garbage") is None and auth.name_of_cookie("a.b.c") is None
    now[0] += 61
    assert auth.name_of_cookie(cookie) is None  # expired
    assert ViewAuth({"alice": "another-key-" + "x" * 20}).name_of_cookie(cookie) is None  # the key changed


def test_headers_sign_in_as_the_api_does():
    auth = ViewAuth({"alice": ALICE})
    assert auth.signed_in({"authorization": f"Bearer {ALICE}"}, {}) == "alice"
    assert auth.signed_in({"x-api-key": ALICE}, {}) == "alice"
    assert auth.signed_in({"authorization": "Bearer wrong"}, {COOKIE: auth.cookie_for("alice")}) is None
    assert auth.signed_in({}, {COOKIE: auth.cookie_for("alice")}) == "alice"
    assert "HttpOnly" in auth.set_cookie("alice", secure=False) and "SameSite=Strict" in auth.set_cookie("alice", secure=True)


# -- reasons and timelines (pure) --------------------------------------------------------------

def _view(clock=None, *, open_page: bool = True) -> LiveView:
    router = Router(load_config({"backends": {"a": {"kind": "fake", "model": "m"}, "b": {"kind": "fake", "model": "m"}},
                                 "routing": {"tiers": [{"name": "low", "below": 0.5, "backends": ["a"]},
                                                       {"name": "high", "backends": ["b"]}]}}), log=False)
    live = LiveView(router) if clock is None else LiveView(router, clock=clock)
    if open_page:
        live.watch()  # what a page's poll does
    return live


def test_reasons_name_each_boundary_the_latency_against_the_deadline_and_the_fallbacks():
    from backends.errors import BackendUnavailable
    from policies.scoring import Score

    live = _view()
    live.observe(ok_outcome("hi"))
    entry = live.requests[-1]
    crossing = Crossing("low", "high", "routing", 0.31, 0.5)
    picked = dataclasses.replace(entry.decision, score=Score(0.31), crossings=(crossing,), deadline_s=2.0)
    failed = (("a", "BackendUnavailable", "HTTP 500"),)
    lines = reasons(dataclasses.replace(entry, decision=picked, failures=failed, backend="b"))
    assert lines[0] == "low|high: score 0.310 < 0.500 → stays low"
    assert lines[1].startswith("a: latency not measured yet")  # the helpers' plan knows nothing of a
    assert "tried a: failed (BackendUnavailable)" in lines and lines[-1] == "answered by b"
    assert BackendUnavailable.__name__ in lines[-2]


def _member(name: str, sample: int, status: str, started: float, latency: float | None, **more) -> dict:
    return {"member": name, "sample": sample, "status": status, "started_s": started, "latency_s": latency,
            "attempts": more.pop("attempts", []), **more}


def test_a_nested_trace_becomes_indented_rows_with_starts_first_tokens_ends_and_losses():
    inner = {"consortium": "inner", "rounds": [{"iteration": 1, "wall_s": 1.0, "confidence": 0.8, "members": [
        _member("glm", 1, "done", 0.0, 0.5, ttft_s=0.1, total_s=0.5),
        _member("glm", 2, "failed", 0.0, None, attempts=[{"error": "BackendUnavailable", "message": "500", "elapsed_s": 0.05}]),
    ], "arbiter": {"arbiter": "judge", "status": "done", "latency_s": 0.4, "ttft_s": 0.1, "order": ["glm#1"]}}]}
    outer = {"consortium": "outer", "judging": "synthesis", "wall_s": 2.0, "calls": 5, "budget": {"limit": 64},
             "rounds": [{"iteration": 1, "wall_s": 2.0, "confidence": 0.9, "members": [
                 {**_member("inner", 1, "done", 0.01, 1.0), "trace": inner},
                 _member("k2", 1, "cancelled", 0.01, None),
             ], "arbiter": {"arbiter": "judge", "status": "done", "latency_s": 0.5, "order": ["inner#1", "k2#1"]}}]}
    view = timeline(slim_trace(outer))
    labels = [(r["label"], r["depth"]) for r in view["rows"]]
    assert labels == [("inner#1", 0), ("glm#1", 1), ("glm#2", 1), ("arbiter judge", 1), ("k2#1", 0), ("arbiter judge", 0)]
    rows = {(r["label"], r["depth"]): r for r in view["rows"]}
    assert rows["glm#1", 1]["start"] == pytest.approx(0.01) and rows["glm#1", 1]["end"] == pytest.approx(0.51)
    assert rows["glm#1", 1]["first"] == pytest.approx(0.11)
    assert rows["glm#2", 1]["lost"] and rows["glm#2", 1]["note"] == "BackendUnavailable: 500"
    assert rows["k2#1", 0]["end"] == pytest.approx(1.5)  # cut when the quorum was met: when the arbiter began
    assert rows["arbiter judge", 0]["start"] == pytest.approx(1.5) and rows["arbiter judge", 0]["end"] == 2.0
    assert (view["calls"], view["budget"], view["verdicts"][0]["ranking"]) == (5, 64, ["inner#1", "k2#1"])


def test_a_trace_keeps_no_texts():
    trace = {"rounds": [{"answer": "secret", "members": [{"text": "an answer", "trace": {"rounds": [{"members": [
        {"text": "deep"}]}]}}], "arbiter": {"reply": "verdict text", "order": ["x"]}}]}
    assert "an answer" not in str(slim_trace(trace)) and "deep" not in str(slim_trace(trace))
    assert slim_trace(trace)["rounds"][0]["arbiter"] == {"order": ["x"]}


def test_the_ring_is_bounded_and_spend_is_bucketed():
    live = _view()
    for _ in range(600):
        live.observe(ok_outcome("x"))
    assert len(live.requests) == 500 and live.seq == 600
    assert [e.seq for e in live.since(597, 10)] == [600, 599, 598]
    [(_, bucket)] = live.last_hour()
    assert bucket.requests == 600 and bucket.keys["-"][0] == 600


def test_with_no_page_open_requests_are_counted_not_kept_and_a_page_keeps_them_from_when_it_opens():
    """Recording costs only while someone looks: a closed page's request is a few additions to
    the hour's spend, no LiveRequest, no sample."""
    now = [1000.0]
    live = _view(lambda: now[0], open_page=False)
    attempt = Attempt("a", 0.2, completion=ok_outcome("x").result.completion)
    for _ in range(3):
        live.observe(ok_outcome("x"))
        live.attempt(attempt, None)
    assert live.seq == 3 and not live.requests and not live.samples
    assert live.last_hour()[0][1].requests == 3
    live.watch()  # a page polls
    live.observe(ok_outcome("x"))
    live.attempt(attempt, None)
    assert [e.seq for e in live.requests] == [4] and len(live.samples["a"]) == 1 and live.recording_since == 1000.0
    now[0] += WATCH_S - 1  # the page still open: its last poll within WATCH_S
    live.observe(ok_outcome("x"))
    assert [e.seq for e in live.requests] == [4, 5]
    now[0] += 2  # closed: no poll for WATCH_S
    live.observe(ok_outcome("x"))
    assert [e.seq for e in live.requests] == [4, 5] and sum(b.requests for _, b in live.last_hour()) == 6
    now[0] += 100
    live.watch()  # opened again: what it keeps starts here, with no gap in it
    live.observe(ok_outcome("x"))
    assert [e.seq for e in live.requests] == [7] and not live.samples and live.recording_since == now[0]


# -- through the app ---------------------------------------------------------------------------

@pytest.fixture
def judged_sim():
    with SimServer({"glm-5.2": SimProfile(answer_tokens=8), "mercury-2": SimProfile(responder=arbiter_responder(confidence=0.9))}) as sim:
        yield sim


@pytest.fixture
def server(sim, judged_sim, monkeypatch):
    monkeypatch.setenv("VIEW_SECRET", SECRET)
    router = _router(sim, judged_sim)
    with RouteServer(router, api_keys={"alice": ALICE, "ci": CI}) as srv:
        _open_page(srv.url, CI)
        yield srv
    router.request_log.flush()


def _router(sim, judged_sim) -> Router:
    """Two tiers on the simulator (`small` holding a key its upstream may echo, `big` priced) and
    a consortium whose arbiter judges (on the judging simulator)."""
    def backend(model: str, url: str | None = None, **more) -> dict:
        return {"kind": "openai", "model": model, "base_url": url or sim.base_url, "max_retries": 0, **more}

    return Router(load_config({
        "backends": {"small": backend("m-small", api_key="${VIEW_SECRET}", rpm=6),
                     "big": backend("m-big", price={"input": 3.0, "output": 15.0}),
                     "glm": backend("glm-5.2", judged_sim.base_url), "arbiter": backend("mercury-2", judged_sim.base_url)},
        "routing": {"scorer": {"kind": "length", "threshold_chars": 200},
                    "tiers": [{"name": "low", "below": 0.5, "backends": ["small"]}, {"name": "high", "backends": ["big"]}]},
        "consortia": {"pair": {"members": ["glm*2"], "arbiter": "arbiter", "judging": "rank"}},
    }), source="server")


def _open_page(url: str, key: str | None = None) -> None:
    """What an open page does: poll. The view keeps requests while one does (live.py)."""
    headers = {"x-api-key": key} if key else {}
    assert httpx.get(f"{url}/ui/api/poll", headers=headers, timeout=30).status_code == 200


def _post(server, key: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", headers={"authorization": f"Bearer {key}"}, json=body, timeout=30)


def _chat(server, key: str, model: str, prompt: str) -> httpx.Response:
    return _post(server, key, "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": prompt}]})


def _signed_in(server) -> httpx.Client:
    client = httpx.Client(base_url=server.url, timeout=30)
    answer = client.post("/ui/login", json={"key": CI})
    assert answer.status_code == 204
    return client


@pytest.mark.integration
def test_the_page_loads_without_a_key_but_its_data_needs_one(server):
    page = httpx.get(f"{server.url}/ui")
    assert page.status_code == 200 and "route" in page.text and "default-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(f"{server.url}/ui/static/app.js").status_code == 200
    assert httpx.get(f"{server.url}/ui/api/poll").status_code == 401
    wrong = httpx.post(f"{server.url}/ui/login", json={"key": "not-a-key-" + "z" * 20})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    assert httpx.post(f"{server.url}/ui/login", content=b"x" * 5000).status_code == 413
    signed = httpx.post(f"{server.url}/ui/login", json={"key": ALICE})
    cookie = signed.headers["set-cookie"]
    assert ALICE not in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    value = signed.cookies[COOKIE]
    auth = httpx.get(f"{server.url}/ui/api/poll", cookies={COOKIE: value}).json()["auth"]
    assert auth == {"required": True, "key": "alice", "admin": True}  # a key given on the command line is the operator's
    # The cookie opens the view only: the model endpoints still want the key itself.
    assert httpx.get(f"{server.url}/v1/models", cookies={COOKIE: value}).status_code == 401
    assert httpx.get(f"{server.url}/ui/api/poll", headers={"x-api-key": CI}).status_code == 200


@pytest.mark.integration
def test_poll_names_geminis_protocol_whatever_the_model_in_its_path(server):
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    for path in ("/v1beta/models/auto:generateContent", "/v1/models/small:streamGenerateContent"):
        answer = httpx.post(f"{server.url}{path}", headers={"x-goog-api-key": ALICE}, json=body, timeout=30)
        assert answer.status_code == 200, answer.text
    requests = _signed_in(server).get("/ui/api/poll", params={"after": 0}).json()["requests"]
    assert [(r["key"], r["protocol"], r["requested"]) for r in requests] == [("alice", "gemini", "small"),
                                                                             ("alice", "gemini", "auto")]


@pytest.mark.integration
def test_poll_shows_who_asked_over_which_protocol_why_and_what_came_of_it(server, sim):
    assert _chat(server, ALICE, "auto", "hi").status_code == 200
    assert _post(server, CI, "/v1/messages", {"model": "big", "max_tokens": 20,
                                               "messages": [{"role": "user", "content": "hello"}]}).status_code == 200
    sim.set_faults("m-small", ["500", "500", "500"])
    assert [_chat(server, ALICE, "small", "fails").status_code for _ in range(3)] == [503, 503, 503]
    assert _chat(server, CI, "pair", "two samples and a judge").status_code == 200
    client = _signed_in(server)
    data = client.get("/ui/api/poll", params={"after": 0}).json()
    assert data["seq"] == 6 and [r["seq"] for r in data["requests"]] == [6, 5, 4, 3, 2, 1]
    first, second, failing, panel = data["requests"][5], data["requests"][4], data["requests"][3], data["requests"][0]
    assert (first["key"], first["protocol"], first["requested"], first["backend"], first["tier"]) == (
        "alice", "openai chat", "auto", "small", "low")
    assert first["reasons"][0] == "low|high: score 0.010 < 0.500 → stays low"
    assert (second["key"], second["protocol"], second["backend"], second["forced"]) == ("ci", "anthropic", "big", True)
    assert second["cost_usd"] > 0 and second["hosted_cost_usd"] == pytest.approx(second["cost_usd"])
    assert failing["status"] == "error" and "tried small: failed (BackendUnavailable)" in failing["reasons"]
    assert panel["consortium"] and panel["backend"] == "pair"
    backends = {b["name"]: b for b in data["backends"]}
    assert backends["small"]["breaker"]["state"] == "open" and backends["small"]["observed"]["failures"] == 3
    [limit] = backends["small"]["rate_limits"]  # 4 of 6 taken, refilled at 0.1 a second since
    assert (limit["what"], limit["limit"]) == ("rpm", 6) and 2 <= limit["level"] < 6
    assert backends["glm"]["observed"]["calls"] == 2 and backends["big"]["hour"]["requests"] == 1
    [run] = data["consortia"]
    assert [r["label"] for r in run["rows"]] == ["glm#1", "glm#2", "arbiter arbiter"]
    assert run["verdicts"][0]["confidence"] == 0.9 and run["calls"] == 3
    keys = {k["key"]: k for k in data["cost"]["keys"]}
    assert (keys["alice"]["requests"], keys["ci"]["requests"]) == (4, 2)
    assert data["cost"]["hosted_backend"] == "big" and data["cost"]["total"] == pytest.approx(second["cost_usd"])
    assert data["log_hour"]["requests"] == 6 and "SQLite" in data["sources"]["log"]
    assert data["learning"]["sections"][0]["title"] == "Scorer in use"
    # Only what is new after the number the page has; panels only when something changed.
    again = client.get("/ui/api/poll", params={"after": 6}).json()
    assert again["requests"] == [] and again["consortia"] == [] and "backends" not in again
    assert "backends" in client.get("/ui/api/poll", params={"after": 6, "full": 1}).json()
    assert ALICE not in str(data) and CI not in str(data)


@pytest.mark.integration
def test_a_request_in_full_comes_from_the_log_with_its_prompt_and_answer(server, sim):
    sim.script("m-small", ["four"])
    assert _chat(server, ALICE, "auto", "what is 2+2?").status_code == 200
    client = _signed_in(server)
    detail = client.get("/ui/api/request", params={"seq": 1}).json()
    facts = dict(detail["facts"])
    assert (detail["prompt"], detail["answer"], detail["content_note"]) == ("what is 2+2?", "four", None)
    assert facts["asked for"] == "auto" and facts["backend"] == "small (m-small)" and facts["id"] == str(detail["id"])
    assert detail["decision"]["boundaries"][0]["threshold"] == 0.5
    # Another process's request: found in the log by its start, duration and backend.
    row = detail["row"]
    elsewhere = client.get("/ui/api/request", params={"seq": 999, "ts": row["ts"], "total": row["total_s"] + 0.0,
                                                      "backend": "small"}).json()
    assert elsewhere["id"] == detail["id"] and elsewhere["prompt"] == "what is 2+2?"
    assert client.get("/ui/api/request", params={"seq": 999, "ts": 1.0, "backend": "x"}).status_code == 404
    assert client.get("/ui/api/request", params={"seq": "x"}).status_code == 400


@pytest.mark.integration
def test_only_the_newest_requests_keep_their_conversation_for_what_was_set_aside(server, sim):
    """An agent's conversation is often hundreds of kilobytes: 500 of them held for the list is
    what made `route serve` grow past 200 MiB. The newest 32 keep theirs for the detail's figures."""
    system = "You are a coding agent. Follow the repository's rules. " * 2000  # ~110 KB of harness
    def ask(n: int) -> str:  # over the length scorer's 200 characters: the high tier, no rate limit
        return (f"rename variable {n} in every module that uses it and update its tests and docs " * 3).strip()

    for n in range(40):
        body = {"model": "auto", "messages": [{"role": "system", "content": system},
                                              {"role": "user", "content": ask(n)}]}
        assert _post(server, ALICE, "/v1/chat/completions", body).status_code == 200
    client = _signed_in(server)
    newest = client.get("/ui/api/request", params={"seq": 40}).json()["decision"]["task"]
    oldest = client.get("/ui/api/request", params={"seq": 1}).json()["decision"]["task"]
    assert newest["set_aside"]["system"] == len(system) and newest["scored_chars"] == len(ask(39))
    assert oldest["set_aside"] is None and oldest["scored_chars"] == len(ask(0))
    held = [e.decision for e in server.app.state.live_view.requests]
    assert sum(d.task.kept for d in held) == 32
    words = [(d.task.first, d.task.latest, d.task.conversation, d.session.turn.text, d.session.turn.first, d.session.task)
             for d in held[:8]]
    assert not any(any(w) for w in words), "an old request's decision still holds its conversation's texts"


@pytest.mark.integration
def test_upstream_errors_echoing_a_secret_are_redacted_in_the_view(server, sim):
    sim.set_faults("m-small", ["echo-key"])
    assert _chat(server, ALICE, "small", "leak?").status_code >= 400
    client = _signed_in(server)
    data = client.get("/ui/api/poll", params={"after": 0}).json()
    detail = client.get("/ui/api/request", params={"seq": 1}).text
    assert SECRET not in str(data) and SECRET not in detail
    assert "[REDACTED]" in data["requests"][0]["error"]


@pytest.mark.integration
def test_without_keys_the_view_is_open_and_content_follows_the_log(sim, tmp_path):
    router = make_router(sim, log={"store_content": False, "path": str(tmp_path / "log.db")})
    with RouteServer(router) as server:
        _open_page(server.url)
        assert httpx.post(f"{server.base_url}/chat/completions", json={
            "model": "auto", "messages": [{"role": "user", "content": "private"}]}).status_code == 200
        data = httpx.get(f"{server.url}/ui/api/poll").json()
        assert data["auth"] == {"required": False, "key": None, "admin": True} and data["requests"][0]["key"] is None
        detail = httpx.get(f"{server.url}/ui/api/request", params={"seq": 1}).json()
        assert detail["prompt"] is None and detail["content_note"] == "not stored: log.store_content is false"
    router.request_log.flush()


@pytest.mark.integration
def test_labels_by_source_count_the_feedback_recorded(server):
    for _ in range(3):
        assert _chat(server, ALICE, "auto", "hi").status_code == 200
    server_router = server.app.state.router
    server_router.request_log.flush()
    # One verdict per request (a later one replaces it: router/store/feedback.py), so three requests.
    for request_id, verdict in (("1", "good"), ("2", "bad"), ("3", "bad")):
        assert _post(server, ALICE, "/v1/feedback", {"id": request_id, "verdict": verdict}).status_code == 200
    sections = {s["title"]: s for s in _signed_in(server).get("/ui/api/poll", params={"full": 1}).json()["learning"]["sections"]}
    facts = {f["label"]: f["value"] for f in sections["Labels by source"]["facts"]}
    assert facts == {"user (bad)": 2, "user (good)": 1}
    learning = sections["Estimated quality and shadow spend"]
    assert learning["facts"] == [{"label": "learning", "value": "off", "error": None, "hint": None}]
    assert "routing.learn" in learning["note"]


@pytest.mark.integration
def test_the_learning_section_shows_what_routing_learn_learned(sim, tmp_path):
    from router.learning.store import LearningStore

    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url},
                           "big": {"kind": "openai", "model": "m-big", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "low", "below": 0.5, "backends": ["small"]},
                                    {"name": "high", "backends": ["big"]}],
                          "learn": {"shadow_rate": 0.0, "budget_usd_per_day": 2.0}},
              "log": {"path": str(tmp_path / "route.db")}}
    labels = [(0, "shadow", f"s{i}", f"prompt {i}", float(i % 2), 1.0) for i in range(7)]
    labels += [(0, "feedback", f"f{i}", f"question {i}", 0.0, 1.0) for i in range(2)]
    LearningStore(tmp_path / "route.db").add_labels(labels)
    with RouteServer(Router(load_config(config), source="server")) as server:
        poll = httpx.get(f"{server.url}/ui/api/poll", params={"full": 1}, timeout=30).json()
    sections = {s["title"]: s for s in poll["learning"]["sections"]}
    facts = {f["label"]: f for f in sections["Estimated quality and shadow spend"]["facts"]}
    assert facts["version in use"]["value"] == "the configured weights"
    assert facts["shadow labels"]["value"] == 7 and facts["feedback labels"]["value"] == 2
    assert facts["shadow spend today (UTC)"]["value"] == "$0.0000 of $2.00"
    [estimate] = [f for label, f in facts.items() if label.endswith("estimated APGR")]
    assert estimate["hint"] == "on 9 labels its weights were not fitted on"


def test_the_static_files_ship_in_the_wheel():
    from hatchling.builders.wheel import WheelBuilder

    root = Path(__file__).parent.parent
    shipped = {Path(f.distribution_path).as_posix() for f in WheelBuilder(str(root)).recurse_included_files()}
    for name in ("index.html", "app.js", "style.css", "icon.svg"):
        assert f"router/server/ui/static/{name}" in shipped


@pytest.mark.integration
def test_a_replica_shows_the_fleets_breakers_and_says_the_state_is_shared(sim, redis_server, monkeypatch):
    """Two replicas sharing Redis: one opens a breaker, the other's view shows it open."""
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url, "max_retries": 0,
                                     "rpm": 6}},
              "routing": {"tiers": [{"name": "only", "backends": ["small"]}], "breaker": {"failures": 2}},
              "state": {"backend": "redis", "url": "${ROUTE_REDIS_URL}", "refresh_ms": 0, "timeout_ms": 30_000}}
    a, b = (Router(load_config(config), source="server", persist=True) for _ in range(2))
    assert a.persist_problem is None and b.persist_problem is None
    with RouteServer(a) as one, RouteServer(b) as other:
        sim.set_faults("m-small", ["500", "500"])
        for _ in range(2):
            assert httpx.post(f"{one.base_url}/chat/completions", json={
                "model": "small", "messages": [{"role": "user", "content": "x"}]}).status_code == 503
        data = httpx.get(f"{other.url}/ui/api/poll", params={"full": 1}).json()
    [small] = data["backends"]
    assert small["breaker"]["state"] == "open" and small["observed"]["calls"] == 0  # seen by one, shown by the other
    assert f"Redis at 127.0.0.1:{redis_server.port} (answering)" in data["sources"]["state"]
    assert data["sources"]["rate_limits"] == "Redis, shared by every replica"
    [limit] = small["rate_limits"]
    assert limit["level"] < 6  # the fleet's bucket: the other replica's two requests were taken from it
