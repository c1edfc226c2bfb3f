"""`route score`: the complexity score of each prompt of a JSONL file (or stdin), one line each.

Kept lean: `route score` over a whole routing set is timed as a process against Wayfinder's
(benchmarks/score_process.py), so this module imports the scorer and nothing else of the router.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from backends.errors import UsageError
from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Weights
from router.cli.output import Output
from router.cli.records import read_jsonl, serving_scorer

__all__ = ["app", "score"]

app = command_app()


@app.command("score")
@handle_errors
def score(
    path: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt}; stdin when left out")] = None,
    weights: Weights = None,
    config: Config = None,
) -> None:
    """Score prompts: reads {"id", "prompt"} lines, writes {"id", "score"} lines.

    A line may hold a conversation instead, {"id", "messages"} in chat format (a client's
    request body's messages): it is scored as its task, the user's own words with the client's
    harness set aside, and its line adds what was set aside (characters per kind) and
    `harness_only` (no words of the user's were found, so the latest user turn was scored whole).

    Scored by the routing scorer `route serve` decides with under the config (-c, else the
    search order): after learning adopted a version, that version's; --weights scores with a
    weights file instead."""
    scorer = serving_scorer(weights, config)
    if path is not None and not path.is_file():
        raise UsageError(f"no such file: {path}. Pass a JSONL file of {{id, prompt}} lines, or pipe them in.")
    stream = path.open(encoding="utf-8") if path is not None else sys.stdin
    try:
        Output().records(_scored(scorer, stream, str(path or "stdin")))
    finally:
        if path is not None:
            stream.close()


def _scored(scorer: Any, lines: TextIO, source: str) -> Iterator[dict[str, Any]]:
    score_text = scorer.score_text
    for record in read_jsonl(lines, source, ("id",)):
        prompt = record.get("prompt")
        if isinstance(prompt, str):
            yield {"id": record["id"], "score": round(score_text(prompt), 6)}
        elif "prompt" not in record and isinstance(record.get("messages"), list):
            yield _conversation(scorer, record["id"], record["messages"])
        else:
            raise UsageError(f"record {record['id']!r}: give a string `prompt`, or `messages` as a list of "
                             '{"role", "content"} objects (chat format).')


def _conversation(scorer: Any, id_: Any, messages: list[Any]) -> dict[str, Any]:
    from policies.task import read_task, scored_text  # only for conversations: plain prompts stay lean

    if not all(isinstance(m, dict) for m in messages):
        raise UsageError(f"record {id_!r}: each of `messages` must be an object such as "
                         '{"role": "user", "content": "..."}.')
    task = read_task(messages)
    return {"id": id_, "score": round(scorer.score_text(scored_text(task)), 6),
            "set_aside": task.set_aside_chars(), "harness_only": task.harness_only}
