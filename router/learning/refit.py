"""Refits away from the event loop: each adaptation runs in a Python process of its own.

A refit is seconds of pure-Python arithmetic. In a thread it would hold the GIL against the
event loop answering clients; in a child process it only takes a core, and a crash there takes
nothing else down. The child is started as `python -m router.learning.refit` (not through
multiprocessing, whose spawn re-imports the caller's main script), reads the job as JSON on
stdin and writes the verdict as JSON on stdout. Where no process can be started, the refit
runs in a thread instead, with one warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

__all__ = ["Refitter"]

_LOG = logging.getLogger("route")
_ROOT = str(Path(__file__).resolve().parents[2])  # where the router, policies and backends packages are


class Refitter:
    def __init__(self) -> None:
        self._threads = False  # no child process could be started here
        self._running: asyncio.subprocess.Process | None = None

    async def adapt(self, current: dict[str, Any], records: list[dict[str, Any]], incumbent: dict[str, Any] | None,
                    seen: Collection[str], z: float, threshold: float | None = None
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """`policies.complexity.training.adapt.adapt_json` in a child process: (weights, figures)."""
        job = {"current": current, "records": records, "incumbent": incumbent, "seen": sorted(seen), "z": z,
               "threshold": threshold}
        if not self._threads:
            try:
                return await self._in_child(job)
            except OSError as exc:
                _LOG.warning("route: refits run in a thread: no process could be started (%r)", exc)
                self._threads = True
        from policies.complexity.training.adapt import adapt_json

        return await asyncio.to_thread(adapt_json, current, records, incumbent, seen, z, threshold)

    async def _in_child(self, job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))}
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "router.learning.refit", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        self._running = child
        try:
            out, err = await child.communicate(json.dumps(job).encode())
        finally:
            self._running = None
        if child.returncode != 0:
            raise RuntimeError(f"the refit process exited with {child.returncode}: {err.decode(errors='replace')[-500:]}")
        result = json.loads(out)
        return result["weights"], result["found"]

    def close(self) -> None:
        """Stop a refit under way (the router is closing)."""
        if self._running is not None and self._running.returncode is None:
            self._running.kill()


def _main() -> int:
    from policies.complexity.training.adapt import adapt_json

    job = json.load(sys.stdin)
    weights, found = adapt_json(job["current"], job["records"], job["incumbent"], set(job["seen"]), job["z"],
                                job.get("threshold"))
    json.dump({"weights": weights, "found": found}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
