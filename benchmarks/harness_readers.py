"""Readers for benchmarks/harness.py: a conversation in, the text the router scores out, read as
the router of this checkout reads it -- or as another checkout's did (`--base`), so a figure and
the figure before a change come from one run on the same bodies.

`Traffic` is one client's requests in turn, read as a router reads them: what the client's
answered requests taught (policies/template.py) is looked up, the task is read with it, and the
request is learned from after its answer. `Before` runs an earlier checkout's reader in a process
of its own (its `policies` package, never mixed with this one's), over the same parsed messages,
emulating that checkout's router: there, reading a request learned from it at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from backends.types import Message
from policies.shapes import KNOWN, Shapes
from policies.task import read_task, scored_text
from policies.template import Templates

__all__ = ["OWNER", "Before", "Traffic"]

OWNER = "bench"  # the API key every benchmark request comes with


class Traffic:
    """One client's traffic through this checkout's router: read, then learned from once answered."""

    def __init__(self, shapes: Shapes = KNOWN):
        self.shapes = shapes
        self.templates = Templates()

    def read(self, messages: list[Message], tools: Any = None) -> str:
        client = self.templates.client(messages, tools, OWNER)
        task = read_task(messages, tools, self.shapes, self.templates.lookup(client))
        sample = self.templates.sample(client, messages, task.words)
        if sample is not None:
            self.templates.learn(sample)
        return scored_text(task)


# Run in the earlier checkout: its reader, fed JSON lines {"stream", "messages", "tools"} on stdin;
# a stream of null is a first request read alone. Its router read a request and learned from it
# in one step (Templates.read); where that method is missing, nothing was learned.
_BEFORE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from policies.task import read_task, scored_text
from policies.template import Templates
streams = {}
for line in sys.stdin:
    request = json.loads(line)
    learned = None
    if request["stream"] is not None and hasattr(Templates, "read"):
        learned = streams.setdefault(request["stream"], Templates()).read(request["messages"], request["tools"], "bench")
    text = scored_text(read_task(request["messages"], request["tools"], learned=learned))
    sys.stdout.write(json.dumps(text) + "\n")
    sys.stdout.flush()
"""


def _names_only(tools: Any) -> Any:
    """The tools as a reader uses them (their names and kinds): the schemas stay in this process."""
    if not isinstance(tools, list):
        return tools
    return [{"type": t.get("type", "function"), **({"function": {"name": (t.get("function") or {}).get("name")}}
                                                   if isinstance(t.get("function"), dict) else {"name": t.get("name")})}
            if isinstance(t, dict) else t for t in tools]


class Before:
    """An earlier checkout's reader (`base`: its directory), in a process of its own."""

    def __init__(self, base: Path):
        self.base = base
        self._process = subprocess.Popen([sys.executable, "-c", _BEFORE, str(base)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, cwd=base)

    def read(self, messages: list[Message], tools: Any = None, stream: str | None = None) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"stream": stream, "messages": messages, "tools": _names_only(tools)},
                                             default=str) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise SystemExit(f"the reader of {self.base} stopped (exit {self._process.wait()})")
        return str(json.loads(line))

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)
