"""The server's client watch (router/server/endpoint.py) leaves nothing behind a request for the
cyclic collector: under load, a cycle per request (the watch, its two tasks, a CancelledError's
frames) kept 1,175 of them in an idle `route serve`, holding memory until a full collection."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from router.server.endpoint import ClientWatch

pytestmark = pytest.mark.unit


async def test_a_finished_requests_tasks_are_freed_without_the_cyclic_collector():
    connection_open = asyncio.Event()  # the client stays: receive() waits, as uvicorn's does

    async def receive() -> dict:
        await connection_open.wait()
        return {"type": "http.disconnect"}

    async def handler() -> weakref.ref:
        watch = ClientWatch(receive)
        watcher = weakref.ref(watch._watcher)
        await asyncio.sleep(0)  # the watcher starts waiting on receive()
        watch.close()
        return watcher

    gc.disable()
    try:
        task = asyncio.get_running_loop().create_task(handler())
        handled = weakref.ref(task)
        watcher = await task
        del task
        for _ in range(3):  # the watcher's cancellation runs to its end
            await asyncio.sleep(0)
        assert watcher() is None and handled() is None, "a request left a reference cycle"
    finally:
        gc.enable()
