"""A fresh `route` process starts without the cyclic garbage collector, gets it back before the
command's real work, and ends without tearing the interpreter down.

Why: start-up imports some 250 modules, and every class, function and pydantic schema they make
is a container the collector tracks, so its full passes keep rescanning a heap that only grows.
None of it is garbage. Measured with `benchmarks/cold_start.py` on one machine, a one-shot
frontier request took 0.61 s with those passes and 0.51-0.62 s (six runs) without. When start-up ends, what it made is
frozen (never scanned again) and collection is back on, so `route serve`, `route eval` and a long
consortium run collect as usual.

The end: once the command has returned and every exit handler has run (the request log's last
flush among them), what is left of the interpreter's shutdown is tearing down some 250 modules
and the objects they hold, to free memory the operating system takes back at once anyway: 6-24 ms
of a 0.3 s request in three runs of `benchmarks/cold_start.py`, whose last line times the same
request with the teardown and without. `end_without_teardown` skips it, as Instagram's Python servers did (`os._exit` after the
exit handlers), and keeps what that shutdown does for the program: its exit status, flushed
output, the exit handlers and the threads it waits for.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Callable
from typing import TypeVar

__all__ = ["end_without_teardown", "ends_startup_itself", "pause_collection", "resume_collection",
           "resumes_collection", "skip_validation_plugins"]

F = TypeVar("F", bound=Callable[..., object])


def pause_collection() -> None:
    """The first thing `route` does."""
    gc.disable()


def skip_validation_plugins() -> None:
    """No pydantic plugin observes `route`'s own config models: looking for one reads the entry
    points of every installed distribution before the first validation (16 ms of a 0.3 s
    one-shot request with this project's dev environment installed). A user who set
    PYDANTIC_DISABLE_PLUGINS keeps that setting."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def resume_collection() -> None:
    """Start-up is over: keep what it made out of every later pass, and collect again."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def ends_startup_itself(command: F) -> F:
    """Mark a command that calls `resume_collection()` itself, once its own start-up (loading
    the config, building the router) is done; every other command resumes before it runs."""
    command.__dict__["_ends_startup_itself"] = True
    return command


def resumes_collection(command: Callable[..., object]) -> bool:
    """Whether the command runner must resume collection before running `command`."""
    return not getattr(command, "_ends_startup_itself", False)


def end_without_teardown(program: Callable[[], object]) -> None:
    """Run `program` (the whole `route` process: its SystemExit passes through), then end the
    process with its exit status as soon as the exit handlers are done.

    Skipped, for a normal shutdown, where it would lose something: an exit handler registered
    before this one (it would run after ours, so never: coverage.py's data, say), a thread the
    shutdown must wait for still running, output that cannot be flushed (a closed pipe: Python
    reports it as it always does), a program that did not end through SystemExit or a return
    (an uncaught exception keeps Python's own report and status), and Python's development mode,
    whose shutdown reports unclosed resources."""
    if sys.flags.dev_mode or _exit_handlers() != 0:
        program()
        return
    status: list[int] = []
    atexit.register(_end_now, status)  # the first registered runs last: after every other handler
    try:
        program()
    except SystemExit as exc:
        status.append(_exit_status(exc.code))
        raise
    status.append(0)


def _exit_handlers() -> int:
    """How many exit handlers are registered (-1 where the interpreter cannot say)."""
    count = getattr(atexit, "_ncallbacks", None)
    return count() if count is not None else -1


def _exit_status(code: object) -> int:
    """The status Python gives a SystemExit with this code (a message is printed, then 1)."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _end_now(status: list[int]) -> None:
    if not status or _threads_to_wait_for():
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(status[0])


def _threads_to_wait_for() -> bool:
    threading = sys.modules.get("threading")
    if threading is None:
        return False
    main = threading.main_thread()
    return any(not thread.daemon for thread in threading.enumerate() if thread is not main)
