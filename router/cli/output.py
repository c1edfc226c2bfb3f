"""All CLI output goes through one Output: data to stdout, messages to stderr.

In `--json` mode stdout carries exactly one JSON document (or one per line for streams), so it
stays parseable whatever else happens; `--quiet` keeps only the data.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Output"]


class Output:
    def __init__(self, *, json_mode: bool = False, quiet: bool = False):
        self.json_mode = json_mode
        self.quiet = quiet
        self._err: Console | None = None
        self._out: Console | None = None

    @property
    def err(self) -> Console:
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._err

    @property
    def out(self) -> Console:
        if self._out is None:
            from rich.console import Console

            self._out = Console(highlight=False, soft_wrap=True)
        return self._out

    def data(self, payload: Any) -> None:
        """One JSON document on stdout."""
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def records(self, documents: Iterable[Any]) -> None:
        """Compact JSON documents on stdout, one a line, flushed once at the end: a stream of
        thousands of small records (`route score`) is written as fast as it is made."""
        import orjson

        write, dumps = sys.stdout.write, orjson.dumps
        for document in documents:
            write(dumps(document).decode() + "\n")
        sys.stdout.flush()

    def text(self, text: str, *, end: str = "") -> None:
        """Raw answer text on stdout (no markup interpretation)."""
        sys.stdout.write(text + end)
        sys.stdout.flush()

    def thinking(self, text: str) -> None:
        """The model's thinking (--show-thinking), dimmed on stderr as it arrives: stdout keeps the
        answer alone, so `route "..." > out.txt` stores no thought. Shown even with --quiet: it was
        asked for by name."""
        from rich.text import Text

        self.err.print(Text(text, style="dim"), end="")

    def info(self, message: str) -> None:
        """A human note on stderr (rich markup allowed); silent with --quiet."""
        if not self.quiet:
            self.err.print(message)

    def warn(self, message: str) -> None:
        """One line on stderr that even --quiet keeps: the answer is not what it seems."""
        from rich.markup import escape

        self.err.print(f"[bold yellow]route: warning:[/] {escape(message)}")

    def error(self, message: str, *, kind: str = "error") -> None:
        from rich.markup import escape

        self.err.print(f"[bold red]route: {kind}:[/] {escape(message)}")
        if self.json_mode:
            self.data({"error": {"type": kind, "message": message}})
