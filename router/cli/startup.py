"""A fresh `route` process starts without the cyclic garbage collector, and gets it back before
the command's real work.

Why: start-up imports some 250 modules, and every class, function and pydantic schema they make
is a container the collector tracks, so its full passes keep rescanning a heap that only grows.
None of it is garbage. Measured with `benchmarks/cold_start.py` on one machine, a one-shot
frontier request took 0.61 s with those passes and 0.51-0.62 s (six runs) without. When start-up ends, what it made is
frozen (never scanned again) and collection is back on, so `route serve`, `route eval` and a long
consortium run collect as usual.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import TypeVar

__all__ = ["ends_startup_itself", "pause_collection", "resume_collection", "resumes_collection",
           "skip_validation_plugins"]

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
