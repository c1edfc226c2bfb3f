"""Which project modules one `route serve` request passes through, traced by running it.

    python benchmarks/request_trace.py [--path /v1/messages] [--stream]

The server's ASGI app is called in this thread, on this event loop (no uvicorn, no socket on
the client side), with the simulated model server on a thread of its own as the upstream; a
profile hook records every project function entered while the request runs (after warm-up
requests, so first-use imports and caches do not count). Printed: the project modules entered,
the project frames on the stack when the upstream call reaches aiohttp (in the task that makes
it), and the deepest stack of project frames seen in any task. A measure of how many layers a request crosses, for
comparing two versions of the server (issue 25), not a timing.

Targets (issue 45): one plain chat request enters at most 40 project modules (`--max-modules N`
sets a bound for any request traced; the issue set one for that request only, so the others are
reported without one), and every request's walk from the server's entry down to the upstream
call passes each module once (no returns). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import orjson

from backends.simulator import SimServer
from router import Router
from router.config_loader import load_config
from router.server import create_app

# Where the project's packages were imported from (an editable install may point elsewhere than
# this checkout): those are the modules a request enters.
ROOT = Path(importlib.import_module("router").__file__ or ".").resolve().parent.parent
PACKAGES = tuple(str(ROOT / name) + os.sep for name in ("router", "backends", "policies"))
BODIES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": "auto", "messages": [{"role": "user", "content": "Say hi"}]},
    "/v1/messages": {"model": "auto", "max_tokens": 64, "messages": [{"role": "user", "content": "Say hi"}]},
    "/v1/responses": {"model": "auto", "input": "Say hi"},
}


def _module(filename: str) -> str | None:
    if not filename.startswith(PACKAGES):
        return None
    return str(Path(filename).relative_to(ROOT).with_suffix("")).replace(os.sep, ".")


class _Trace:
    def __init__(self) -> None:
        self.modules: set[str] = set()
        self.at_aiohttp: list[int] = []  # project frames in the calling task, per aiohttp request
        self.deepest = 0  # the most project frames on one task's stack at any call
        self.rooms: list[str] = []  # the modules of the stack at the upstream call, outermost first

    def __call__(self, frame, event: str, arg: object) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        module = _module(filename)
        if module is not None:
            self.modules.add(module)
            depth, caller = 0, frame
            while caller is not None:
                depth += _module(caller.f_code.co_filename) is not None
                caller = caller.f_back
            self.deepest = max(self.deepest, depth)
        elif "aiohttp" in filename and frame.f_code.co_name == "_request" and not self.at_aiohttp:
            depth, caller, stack = 0, frame.f_back, []
            while caller is not None:
                module = _module(caller.f_code.co_filename)
                depth += module is not None
                if module is not None and (not stack or stack[-1] != module):
                    stack.append(module)
                caller = caller.f_back
            self.at_aiohttp.append(depth)
            self.rooms = stack[::-1]


async def _request(app, path: str, body: bytes) -> tuple[int, bytes]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": path,
             "raw_path": path.encode(), "root_path": "", "scheme": "http", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
    sent = False
    finished = asyncio.Event()
    status, parts = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                finished.set()

    await app(scope, receive, send)
    return status, b"".join(parts)


async def run(path: str, stream: bool) -> tuple[int, int]:
    """(project modules entered, returns on the walk down to the upstream call)."""
    os.environ["ROUTE_HOME"] = tempfile.mkdtemp(prefix="route-trace-")  # the request log, as `route serve` keeps one
    with SimServer(profiles={"sim-fast": {"ttft_s": 0.0, "answer_tokens": 8}}) as sim:
        config = {"backends": {"sim": {"kind": "openai", "model": "sim-fast", "base_url": sim.base_url}},
                  "routing": {"tiers": [{"name": "all", "backends": ["sim"]}]}}
        router = Router(load_config(config), source="server", clients_retry=True)
        app = create_app(router)
        body = orjson.dumps({**BODIES[path], "stream": stream})
        for _ in range(5):
            status, answer = await _request(app, path, body)
            assert status == 200, answer[:300]
        trace = _Trace()
        sys.setprofile(trace)
        try:
            status, _ = await _request(app, path, body)
        finally:
            sys.setprofile(None)
        assert status == 200
        await router.aclose()
    print(f"POST {path}{' (stream)' if stream else ''}: {len(trace.modules)} project modules entered; "
          f"project frames at the aiohttp call: {trace.at_aiohttp[0] if trace.at_aiohttp else '-'}; "
          f"deepest project stack: {trace.deepest}")
    for module in sorted(trace.modules):
        print(f"  {module}")
    return len(trace.modules), _print_rooms(trace.rooms)


def _print_rooms(rooms: list[str]) -> int:
    """The modules the request passes through on its way down to the upstream call, outermost
    first (the stack at that call, a module's consecutive frames as one room); a module met again
    further down is a return: a layer that calls back up into one above it (issue 45: none)."""
    returns = [room for i, room in enumerate(rooms) if room in rooms[:i]]
    print(f"the walk from the server's entry to the upstream call: {len(rooms)} rooms, {len(returns)} returns"
          + (f" ({', '.join(returns)})" if returns else ""))
    print("  " + " -> ".join(rooms))
    return len(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default="/v1/chat/completions", choices=sorted(BODIES))
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--max-modules", type=int, default=None,
                        help="the most project modules the request may enter (default: 40 for a plain chat request, "
                             "issue 45's target; none for the others)")
    args = parser.parse_args()
    bound = args.max_modules
    if bound is None and args.path == "/v1/chat/completions" and not args.stream:
        bound = 40
    modules, returns = asyncio.run(run(args.path, args.stream))
    missed = [f"{modules} modules entered (target at most {bound})"] if bound is not None and modules > bound else []
    missed += [f"{returns} returns on the walk (target 0)"] if returns else []
    print("targets: " + ("missed: " + "; ".join(missed) if missed else "met")
          + ("" if bound is not None else " (no returns; no bound on modules for this request: --max-modules N sets one)"))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
