"""Routing records read from JSONL, and the scorer to judge them with: what `route score`,
`route eval` and `route calibrate` share. Bad input is a UsageError naming the file and line."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from backends.errors import UsageError

__all__ = ["load_scorer", "read_jsonl", "read_records"]


def load_scorer(weights: Path | None) -> Any:
    from policies.complexity import ComplexityScorer

    try:
        return ComplexityScorer.load(weights)
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(
            f"could not read the weights file {weights}: {exc}. Pass a file written by "
            "`route calibrate` or `python -m policies.complexity.training.fit`, or leave out --weights "
            "to use the shipped default."
        ) from exc


def read_jsonl(lines: Iterator[str], source: str, required: Sequence[str]) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(
                f"{source} line {n} is not JSON ({exc.msg}). Each line must be one JSON object "
                'such as {"id": "1", "prompt": "..."}.'
            ) from exc
        missing = [k for k in required if not isinstance(record, dict) or k not in record]
        if missing:
            raise UsageError(
                f"{source} line {n} lacks {', '.join(missing)}. Each line needs "
                f"{', '.join(required)}."
            )
        yield record


def read_records(path: Path, required: Sequence[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"no such file: {path}. Pass a JSONL file of routing records.")
    with path.open(encoding="utf-8") as f:
        records = list(read_jsonl(f, str(path), required))
    if not records:
        raise UsageError(f"{path} holds no records. Pass a JSONL file with at least one line.")
    return records
