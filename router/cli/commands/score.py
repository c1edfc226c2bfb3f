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
from router.cli.options import Weights
from router.cli.output import Output
from router.cli.records import load_scorer, read_jsonl

__all__ = ["app", "score"]

app = command_app()


@app.command("score")
@handle_errors
def score(
    path: Annotated[Path | None, typer.Argument(help="JSONL of {id, prompt}; stdin when left out")] = None,
    weights: Weights = None,
) -> None:
    """Score prompts: reads {"id", "prompt"} lines, writes {"id", "score"} lines."""
    scorer = load_scorer(weights)
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
    for record in read_jsonl(lines, source, ("id", "prompt")):
        prompt = record["prompt"]
        if not isinstance(prompt, str):
            raise UsageError(f"record {record['id']!r}: prompt must be a string.")
        yield {"id": record["id"], "score": round(score_text(prompt), 6)}
