"""A real HTTP server on a free loopback port that answers each request with a handler written
as an `httpx.Request -> httpx.Response` function: wire-format tests state what a server says
in a few lines, and the backend under test still goes through its real client and sockets.
The handler sees the client's port as the header `x-peer-port` (connection reuse is visible).
Set as HTTP_PROXY, it also answers as a forward proxy would be asked (the request's full URL)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

__all__ = ["Handler", "answering", "serving"]

Handler = Callable[[httpx.Request], httpx.Response]
_FRAMING = {"content-length", "transfer-encoding", "connection", "content-encoding"}


def _request_handler(handler: Handler) -> type[BaseHTTPRequestHandler]:
    class Answer(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a model server does

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            headers = [*self.headers.items(), ("x-peer-port", str(self.client_address[1]))]
            # an absolute URL in the request line: this server is being used as a forward proxy
            url = self.path if self.path.startswith("http") else f"http://{self.headers.get('host')}{self.path}"
            request = httpx.Request(self.command, url, headers=headers, content=self.rfile.read(length))
            response = handler(request)
            body = response.read()
            self.send_response(response.status_code)
            for name, value in response.headers.multi_items():
                if name.lower() not in _FRAMING:
                    self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet tests

    return Answer


@contextlib.contextmanager
def answering(handler: Handler) -> Iterator[str]:
    """The server's base URL (`http://127.0.0.1:PORT/v1`) while the block runs."""
    with serving(_request_handler(handler)) as url:
        yield url


@contextlib.contextmanager
def serving(request_handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`answering` for a test that writes its own request handler (one that paces its writes)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), request_handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
