"""The live member view of `route -m CONSORTIUM`: each member's and the arbiter's state as the
consortium runs, redrawn on stderr (or printed once where stderr is no terminal)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from router.cli.output import Output

__all__ = ["LiveMembers", "live_view"]

_STYLE = {"waiting": "dim", "running": "yellow", "streaming": "cyan", "done": "green",
          "failed": "red", "cancelled": "dim", "skipped": "dim", "rejected": "magenta"}


class LiveMembers:
    """Rows of member and arbiter states, fed by consortium events, rendered as a rich table."""

    def __init__(self, name: str):
        self.name = name
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.started = time.perf_counter()
        self.on_answer: Callable[[], None] = lambda: None  # the answer starts streaming to stdout
        self.on_finish: Callable[[], None] = lambda: None  # the run has its answer: every state is final

    def handle(self, event: dict[str, Any]) -> None:
        if event.get("type") == "answer":
            self.on_answer()
            return
        if event.get("type") == "finished":
            if event.get("path") == self.name:  # the consortium asked for, not one nested in it
                self.on_finish()
            return
        if event.get("type") not in ("member", "arbiter"):
            return
        key = (event["path"], ("arbiter " if event["type"] == "arbiter" else "") + event["id"])
        row = self.rows.setdefault(key, {})
        row.update({k: v for k, v in event.items() if v is not None})

    def __rich__(self):
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=f"consortium {self.name} · {time.perf_counter() - self.started:.1f} s",
                      title_justify="left", expand=False)
        for column in ("where", "member", "state", "tokens", "latency", "note"):
            table.add_column(column)
        for (path, label), row in self.rows.items():
            state = row.get("status", "waiting")
            latency = row.get("latency_s")
            where = path.partition("/")[2] or "·"  # relative to the consortium asked for
            table.add_row(escape(where), escape(label), f"[{_STYLE.get(state, '')}]{state}[/]",
                          str(row.get("tokens", "")), f"{latency:.2f} s" if latency else "",
                          escape(str(row.get("error", ""))[:60]) if state == "failed" else "")
        return table


@contextmanager
def live_view(router, name: str, out: Output):
    """Show the members of consortium `name` live on stderr while the body runs; where stderr is
    no terminal (nothing can be redrawn), once, when the run is over."""
    view = LiveMembers(name)
    router.backend(name).add_listener(view.handle)
    if not out.err.is_terminal:
        with _final_table(view, out):
            yield view
        return
    from rich.live import Live

    # stdout stays the answer's alone (no redirect); the table freezes when the answer starts,
    # so a terminal showing both is not redrawn over the streaming text.
    live = Live(view, console=out.err, refresh_per_second=8, transient=False,
                redirect_stdout=False, redirect_stderr=False)

    def stop() -> None:
        if live.is_started:
            live.stop()

    view.on_answer = stop
    live.start(refresh=True)
    try:
        yield view
    finally:
        stop()


@contextmanager
def _final_table(view: LiveMembers, out: Output):
    """The table once, with every member's and arbiter's final state: when the run has its answer
    (before the stats line), else (a failure, Ctrl-C) when the body ends."""
    printed = False

    def show() -> None:
        nonlocal printed
        if not printed:
            printed = True
            out.err.print(view)

    view.on_finish = show
    try:
        yield
    finally:
        show()
