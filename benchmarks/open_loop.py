"""An open-loop load generator: POST one body at a fixed rate, whatever the server's pace.

    python benchmarks/open_loop.py URL --rate 200 --duration 8 --body '{"model": ...}' [--auth-env NAME] [--cpu 3]

Request i is due at start + i / rate and sent then on a free keep-alive connection (a new one
if none is free), so a slow answer never delays the next request (a closed loop like wrk's
would send less and hide the queueing). Latency runs from when a request was due to its last
byte, so time spent waiting to be sent counts too. Prints one JSON line: sent, ok, errors,
p50_ms, p99_ms, achieved rate. Plain asyncio streams and a minimal HTTP/1.1 reader (length or
chunked bodies): an HTTP client library would cost more CPU than the server it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from urllib.parse import urlsplit

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_LAST_CHUNK = b"\r\n0\r\n\r\n"  # the end of the last data chunk, the zero-size chunk, no trailers


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


async def _read_response(reader: asyncio.StreamReader) -> int:
    """Read one response to its end; returns the status code."""
    status = int((await reader.readline()).split(b" ", 2)[1])
    length, chunked = None, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        # One read to the last-chunk marker rather than two per chunk: a stream has a chunk per
        # token, and on a small box this generator's CPU is taken from the server it measures.
        # A chunk's data cannot end the body early: the marker needs an empty chunk-size line.
        if int((await reader.readline()).split(b";")[0], 16) == 0:
            await reader.readline()  # an empty body: the blank line after the zero-size chunk
        else:
            await reader.readuntil(_LAST_CHUNK)
    elif length is not None:
        await reader.readexactly(length)
    return status


class OpenLoop:
    def __init__(self, url: str, body: bytes, headers: dict[str, str]):
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        head = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
        self.request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        self.idle: list[Connection] = []
        self.latencies: list[float] = []
        self.errors = 0

    async def _one(self, due: float) -> None:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        try:
            conn[1].write(self.request)
            status = await _read_response(conn[0])
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            self.errors += 1
            conn[1].close()
            return
        if status == 200:
            self.latencies.append(time.perf_counter() - due)
        else:
            self.errors += 1
        self.idle.append(conn)

    async def run(self, rate: float, duration_s: float) -> dict:
        tasks = []
        start = time.perf_counter()
        n = int(rate * duration_s)
        for i in range(n):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self._one(due)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        for _, writer in self.idle:
            writer.close()
        return {"sent": n, "ok": len(self.latencies), "errors": self.errors, "rate": n / elapsed,
                "p50_ms": percentile(self.latencies, 50) * 1000, "p99_ms": percentile(self.latencies, 99) * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--rate", type=float, required=True, help="requests per second")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of sending")
    parser.add_argument("--body", required=True, help="the JSON body")
    parser.add_argument("--auth-env", help="environment variable holding a bearer token to send")
    parser.add_argument("--cpu", type=int, action="append", help="pin to this CPU (repeatable)")
    args = parser.parse_args()
    if args.cpu:
        os.sched_setaffinity(0, set(args.cpu))
    headers = {"Authorization": f"Bearer {os.environ[args.auth_env]}"} if args.auth_env else {}
    try:  # uvloop (uvicorn[standard] brings it) spends less CPU per request than asyncio's loop
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    result = run(OpenLoop(args.url, args.body.encode(), headers).run(args.rate, args.duration))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
