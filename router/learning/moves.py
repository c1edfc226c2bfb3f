"""The traffic a new version would move: the latest logged requests, placed by the version in
use and by the new one, counted by which tiers they move between.

An operator who lets a router learn asks first what will change. The request log already holds
the answer's raw material (each request's prompt, when `log.store_content` keeps it): the last
`window` of them are placed again, by both models, with the same scorer code that routes (no
model call). A request whose tier differs is a move, up or down; the report counts them by
`from→to` tier, gives a few prompts of each move (the kinds of request that move) and how many
moved requests each client key sent, and the share of the window that moves, which the
confirmation bound (`routing.learn.max_moved`) reads.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policies.routing_model import RoutingModel
    from router.config import Config

__all__ = ["EXAMPLES", "describe", "moved", "recent_prompts"]

EXAMPLES = 3  # prompts shown per move
_CHARS = 80  # of each


def recent_prompts(config: Config, window: int) -> list[tuple[str, str | None]] | None:
    """(prompt, client key name) of the last `window` logged requests, newest first; None when
    there is no log to read (off, or it cannot be opened)."""
    if not config.log.enabled or window <= 0:
        return None
    from backends.errors import ConfigError
    from router.store import StoreError
    from router.store.choice import open_log

    try:
        log = open_log(config, check=False)
    except (StoreError, ConfigError):
        return None
    try:
        with log.guard():
            rows = log.recent(window)
    except StoreError:
        return None
    finally:
        log.close()
    return [(str(r["prompt"]), r.get("key_name")) for r in rows if r.get("prompt")]


def moved(before: RoutingModel, after: RoutingModel, prompts: list[tuple[str, str | None]] | None,
          window: int) -> dict[str, Any]:
    """What placing `prompts` ((prompt, key name) pairs) by `after` instead of `before` changes
    (see the module docstring)."""
    if prompts is None:
        return {"window": window, "requests": 0, "changed": 0, "up": 0, "down": 0, "share": 0.0, "moves": {},
                "examples": {}, "keys": {}, "note": "no request log to read (log off, or no prompts stored)"}
    moves: Counter[str] = Counter()
    keys: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    up = down = 0
    names = [t.name for t in before.tiers]
    for prompt, key in prompts:
        old, new = before.place_text(prompt).index, after.place_text(prompt).index
        if old == new:
            continue
        keys[key or "-"] += 1
        up, down = (up + 1, down) if new > old else (up, down + 1)
        move = f"{names[old]}→{names[new]}"
        moves[move] += 1
        shown = examples.setdefault(move, [])
        if len(shown) < EXAMPLES:
            shown.append(prompt if len(prompt) <= _CHARS else prompt[:_CHARS - 1] + "…")
    changed = up + down
    return {"window": window, "requests": len(prompts), "changed": changed, "up": up, "down": down,
            "share": round(changed / len(prompts), 4) if prompts else 0.0, "moves": dict(moves.most_common()),
            "examples": examples, "keys": dict(keys.most_common())}  # fmt: skip


def describe(report: dict[str, Any] | None) -> str:
    """The report in one line, for `route learn status` and the web view."""
    if not report:
        return "not measured"
    if not report.get("requests"):
        return report.get("note") or "no logged requests to place"
    moves = ", ".join(f"{k} {v}" for k, v in report["moves"].items()) or "none"
    what = "labelled prompts (no request log to read)" if report.get("of") == "labels" else "requests"
    return (f"{report['changed']} of the last {report['requests']} {what} change tier "
            f"({report['up']} up, {report['down']} down: {moves})")
