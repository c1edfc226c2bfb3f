"""Where the benchmarks find routing records: a directory given on the command line, by
default ../shared/data/routing beside the repository, else the small committed sample.

The sample (tests/data/routing_sample.jsonl: 150 GSM8K and 150 MMLU records from RouteLLM,
Ong et al., 2024, Apache-2.0) lets every benchmark run on a fresh checkout; its figures are
not the ones to quote, and a note on stderr says so.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent / "shared" / "data" / "routing"
SAMPLE = ROOT / "tests" / "data" / "routing_sample.jsonl"

__all__ = ["DEFAULT_DIR", "SAMPLE", "routing_files", "routing_sets"]


def routing_files(directory: Path | None) -> list[Path]:
    """The `*.jsonl` files in `directory` (default `DEFAULT_DIR`), or the sample with a note."""
    where = directory or DEFAULT_DIR
    files = sorted(where.glob("*.jsonl")) if where.is_dir() else []
    if files:
        return files
    if directory is not None:
        raise SystemExit(f"no *.jsonl routing records in {directory}; pass a directory of routing sets")
    print(
        f"note: {DEFAULT_DIR} not found; using the 300-record sample {SAMPLE.relative_to(ROOT)} "
        "(figures from it are only a smoke test; pass the routing data directory for real ones)",
        file=sys.stderr,
    )
    return [SAMPLE]


def routing_sets(directory: Path | None) -> dict[str, list[dict[str, Any]]]:
    """Records per set: one per file, or the sample split by the dataset in each record's id."""
    from policies.complexity.training.fit import load_records
    from policies.complexity.training.learn import dataset_of

    sets: dict[str, list[dict[str, Any]]] = {}
    for path in routing_files(directory):
        for r in load_records([path]):
            name = path.stem if path != SAMPLE else dataset_of(r)
            sets.setdefault(name, []).append({**r, "dataset": name})
    return sets
