"""A real headless Chromium for the web view's tests: Debian's `chromium`, driven by Python's
`playwright` (its own browser downloads are never used: `executable_path` points at the system one).

Locally a machine without either skips those tests, naming what to install; under CI (the `CI`
variable set) a missing one fails them, as tests/redis_server.py does for redis-server.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.redis_server import require_binary

__all__ = ["FLAGS", "chromium_context"]

# What works in a container without a display, a GPU or a network beyond loopback.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def _driver() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        message = "needs playwright (the dev extra: pip install -e '.[dev]')"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run the browser tests)", pytrace=False)
        pytest.skip(message)
    return sync_playwright


def chromium_context(**options: Any) -> Iterator[Any]:
    """A browser context in a fresh profile (its own --user-data-dir), closed afterwards."""
    binary = require_binary("chromium", "chromium")
    sync_playwright = _driver()
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="route-chromium-") as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=binary, headless=True, args=FLAGS,
                                                       **options)
        try:
            yield context
        finally:
            context.close()
