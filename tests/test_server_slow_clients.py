"""`route serve`'s limits over real sockets: a client that sends its head or body too slowly is
answered 408 and disconnected within the configured timeout, a huge head is a 431, and
connections beyond the limit get a 503 -- each an OpenAI-shaped JSON error.

Timeouts here are short (0.3-0.5 s); a socket timeout of 20 s is only the failure guard for a
server that never hangs up, not a timing margin."""

from __future__ import annotations

import socket
import time

import httpx
import orjson
import pytest

from router.server import RouteServer, ServerLimits
from tests.helpers import make_router

pytestmark = pytest.mark.integration

GUARD_S = 20.0  # a server that never hangs up fails the test after this long
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.fixture
def limited(sim):
    limits = ServerLimits(header_timeout_s=0.5, body_timeout_s=0.5, max_header_bytes=16 * 1024, max_connections=6)
    with RouteServer(make_router(sim), limits=limits) as srv:
        yield srv, limits


def connect(srv) -> socket.socket:
    sock = socket.create_connection((srv.host, srv.port), timeout=GUARD_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def status_and_error(reply: bytes) -> tuple[int, dict]:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), head
    return int(head.split(b" ", 2)[1]), orjson.loads(body)["error"]


def test_a_client_that_stalls_in_its_head_is_dropped_after_the_header_timeout(limited):
    srv, limits = limited
    with connect(srv) as sock:
        sock.sendall(HEAD[:30])  # half a request line, then nothing
        started = time.monotonic()
        reply = read_until_closed(sock)  # returns when the server hangs up
        waited = time.monotonic() - started
    status, error = status_and_error(reply)
    assert status == 408 and error["code"] == "request_timeout" and "--header-timeout" in error["message"]
    assert waited >= limits.header_timeout_s * 0.9  # not before the timeout (timer granularity aside)


def test_a_keep_alive_connections_later_head_that_stalls_is_dropped_too(limited, sim):
    """The head timer is one per connection (re-armed when it fires, not per request): a second
    request's head still gets its full timeout, counted from its own first byte, and no more."""
    srv, limits = limited
    body = b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}'
    with connect(srv) as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        first = b""
        while b"\r\n\r\n" not in first:
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        time.sleep(limits.header_timeout_s * 0.6)  # into the timer the connection's opening armed
        sock.sendall(HEAD[:30])
        started = time.monotonic()
        reply = read_until_closed(sock)
        waited = time.monotonic() - started
    status, error = status_and_error(reply[reply.index(b"HTTP/1.1 408"):])
    assert status == 408 and error["code"] == "request_timeout"
    assert waited >= limits.header_timeout_s * 0.9  # its own timeout, not what was left of the first's


def test_a_silent_connection_is_dropped_too(limited):
    srv, _ = limited
    with connect(srv) as sock:
        status, _ = status_and_error(read_until_closed(sock))
    assert status == 408


def test_a_client_that_stalls_in_its_body_is_dropped_after_the_body_timeout(limited, sim):
    srv, limits = limited
    with connect(srv) as sock:
        sock.sendall(HEAD + b"Content-Length: 100\r\n\r\n" + b'{"model": "auto"')  # 16 of 100 bytes
        started = time.monotonic()
        reply = read_until_closed(sock)
        waited = time.monotonic() - started
    status, error = status_and_error(reply)
    assert status == 408 and "--body-timeout" in error["message"]
    assert waited >= limits.body_timeout_s * 0.9
    assert sim.stats("m-small")["requests"] == 0


def test_a_slow_client_does_not_hold_up_others(limited, sim):
    srv, _ = limited
    stalled = [connect(srv) for _ in range(3)]
    for sock in stalled:
        sock.sendall(HEAD[:20])
    answer = httpx.post(f"{srv.base_url}/chat/completions", timeout=GUARD_S,
                        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 200
    for sock in stalled:
        assert status_and_error(read_until_closed(sock))[0] == 408
        sock.close()


def test_a_head_over_the_size_limit_is_a_431(limited, sim):
    srv, limits = limited
    with connect(srv) as sock:
        sock.sendall(HEAD + b"X-Big: " + b"a" * 8000 + b"\r\n")  # under the limit so far
        try:
            for _ in range(64):  # 512 KB more, in pieces, as a flooding client would
                sock.sendall(b"X-More: " + b"b" * 8000 + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server hung up while we were still sending: what we want
        reply = read_until_closed(sock)
    status, error = status_and_error(reply)
    assert status == 431 and str(limits.max_header_bytes) in error["message"]
    ok = httpx.post(f"{srv.base_url}/chat/completions", timeout=GUARD_S,
                    json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
                    headers={"x-normal": "n" * 1000})
    assert ok.status_code == 200


def test_connections_beyond_the_limit_get_a_503(limited):
    srv, limits = limited
    held = []
    for _ in range(limits.max_connections):  # each proven open by a full exchange on it
        sock = connect(srv)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200 OK" in sock.recv(65536)
        held.append(sock)
    with connect(srv) as extra:
        refusal = read_until_closed(extra)
    status, error = status_and_error(refusal)
    assert status == 503 and error["code"] == "too_many_connections"
    assert b"\r\nretry-after: 1\r\n" in refusal.lower()  # every 503 says when to ask again (issue 38)
    held.pop().close()
    deadline = time.monotonic() + GUARD_S  # the server notices the close on its next loop turn
    while time.monotonic() < deadline:
        with connect(srv) as again:
            again.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if b"200 OK" in read_until_closed(again):
                break
    else:
        pytest.fail("a freed connection slot was never reused")
    for sock in held:
        sock.close()


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="header_timeout_s"):
        ServerLimits(header_timeout_s=0)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens", "/v1/responses", "/v1/feedback",
                                  "/messages", "/responses", "/v1beta/models/auto:streamGenerateContent",
                                  "/v1/models/auto:countTokens"])
def test_every_post_endpoint_drops_a_stalled_body_after_the_body_timeout(limited, sim, path):
    """One body reader for every POST: before, only chat completions had a body timeout and the
    others waited for ever."""
    srv, _ = limited
    head = HEAD.replace(b"/v1/chat/completions", path.encode())
    with connect(srv) as sock:
        sock.sendall(head + b"Content-Length: 100\r\n\r\n" + b'{"model": "auto"')
        status, error = status_and_error(read_until_closed(sock))
    assert status == 408 and "--body-timeout" in error["message"]
    assert sim.stats("m-small")["requests"] == 0


def test_feedback_refuses_a_large_body_before_reading_it(sim):
    """Feedback is a few bytes: a body announced larger than 64 KiB is refused at once (before,
    the whole body was read first, ignoring even --max-body)."""
    with RouteServer(make_router(sim)) as srv, connect(srv) as sock:
        sock.sendall(b"POST /v1/feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 157286400\r\n\r\n" + b"{" * 1024)
        status, error = status_and_error(read_until_closed(sock))
    assert status == 413 and error["code"] == "request_too_large"


def test_every_post_endpoint_keeps_the_max_body_limit(sim):
    with RouteServer(make_router(sim), body_limit_bytes=2048) as srv:
        for path in ("/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses",
                     "/v1beta/models/auto:generateContent", "/v1beta/models/auto:countTokens"):
            response = httpx.post(f"{srv.base_url.removesuffix('/v1')}{path}", content=b"x" * 4096,
                                  headers={"content-type": "application/json"}, timeout=GUARD_S)
            assert response.status_code == 413, (path, response.text)
