"""An OpenAI-compatible chat server on a free loopback port whose streams arrive in parts, each
part sent only when the test says so: a client that reads everything at once would otherwise
receive two events in one read, and the backend would join them into one chunk.

    with gated(answer) as upstream:        # answer(request body, key) -> Reply
        ... upstream.base_url ...
        upstream.release()                 # the next part of a stream may go

`release` may come before the part is due (it is counted); a part waits at most `wait_s` for
its release, then goes anyway (counted in `unreleased`), so a test that forgot one is slow, never
stuck, and one can tell that a part went before its release.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["GatedUpstream", "Reply", "gated"]


@dataclass
class Reply:
    """What the server answers: streamed, `parts` of chat-completion deltas (each part a list of
    deltas sent together); plain, the whole message. `finish` is the finish reason."""

    parts: list[list[dict[str, Any]]]
    finish: str = "stop"
    message: dict[str, Any] = field(default_factory=dict)


Answer = Callable[[dict[str, Any], str], Reply]


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class GatedUpstream:
    def __init__(self, answer: Answer, wait_s: float = 10.0):
        self.answer, self.wait_s = answer, wait_s
        self._releases = threading.Semaphore(0)
        self.unreleased = 0  # parts sent because their wait ran out, not because they were released
        self.base_url = ""

    def release(self, parts: int = 1) -> None:
        for _ in range(parts):
            self._releases.release()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
                reply = upstream.answer(body, key)
                if body.get("stream"):
                    self._stream(reply)
                else:
                    self._plain(body, reply)

            def _plain(self, body: dict[str, Any], reply: Reply) -> None:
                data = json.dumps({"id": "c1", "object": "chat.completion", "model": body.get("model"),
                                   "choices": [{"index": 0, "message": {"role": "assistant", **reply.message},
                                                "finish_reason": reply.finish}],
                                   "usage": {"prompt_tokens": 3, "completion_tokens": 5}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")  # the body ends when the connection does
                self.end_headers()
                for number, part in enumerate(reply.parts):
                    if number and not upstream._releases.acquire(timeout=upstream.wait_s):
                        upstream.unreleased += 1  # went anyway: the test never released it
                    self.wfile.write(b"".join(_event(_chunk(delta)) for delta in part))
                    self.wfile.flush()
                final = {**_chunk({}, reply.finish), "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
                self.wfile.write(_event(final) + b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@contextlib.contextmanager
def gated(answer: Answer, wait_s: float = 10.0) -> Iterator[GatedUpstream]:
    upstream = GatedUpstream(answer, wait_s)
    server = ThreadingHTTPServer(("127.0.0.1", 0), upstream.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    upstream.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
