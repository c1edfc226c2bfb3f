"""Routing records read from JSONL, and the scorer to judge them with: what `route score`,
`route eval` and `route calibrate` share. Bad input is a UsageError naming the file and line.

`route score` and `route eval` judge with the routing scorer `route serve` decides with
(`serving_scorer`): the config's, or the version learning adopted and the server installed, so
that after learning the CLI and the server agree on every prompt."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from backends.errors import UsageError

__all__ = ["load_scorer", "read_jsonl", "read_records", "serving_scorer"]

_LOG = logging.getLogger("route")


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


def serving_scorer(weights: Path | None, config: str | None) -> Any:
    """`weights`' scorer when given; else the routing scorer `route serve` decides with under
    `config` (the search order when None): the config's scorer, replaced by the version in use
    when the config learns (router/learning/). An unreadable learning store is warned about and
    the configured scorer used, as the server does."""
    if weights is not None:
        return load_scorer(weights)
    from router.paths import find_config

    found = find_config(config)
    if found is None or _shipped_only(found):  # the shipped scorer, no learning: stays lean (no schema)
        return load_scorer(None)
    from router.config_loader import load_config
    from router.wiring import build_model

    loaded = load_config(config)
    model = build_model(loaded)
    if loaded.config.routing.learn is not None:
        try:
            model = _in_use(loaded.config, model)
        except Exception as exc:  # the server routes on the configured weights then too
            _LOG.warning("route: the learning store could not be read (%r); scoring with the configured weights", exc)
    return _TextScorer(model.scorer)


def _shipped_only(path: Path) -> bool:
    """Whether a config file routes with the shipped scorer and learns nothing, read as plain
    YAML (the embedded default does too): then the schema (pydantic) and the composition root
    need not be imported to score with what `route serve` uses. Anything else, or a file that
    does not read, takes the full path (which says what is wrong with it)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    routing = data.get("routing") if isinstance(data, dict) else None
    if routing is None:
        return isinstance(data, dict)
    if not isinstance(routing, dict) or routing.get("learn") is not None:
        return False
    scorer = routing.get("scorer")
    return scorer is None or scorer == {"kind": "learned"}


def _in_use(config: Any, model: Any) -> Any:
    """The routing model of the learned version in use (`model` itself when none is)."""
    from router.learning import open_store
    from router.learning.versions import Configured, model_of, weights_of

    store = open_store(config)
    current, _ = store.current()
    if not current:
        return model
    configured = Configured.of(model, config)
    row = store.version(current)
    return model_of(configured, weights_of(store, configured, row.heads if row is not None else {}), current)


class _TextScorer:
    """A routing scorer with `score_text` (a prompt's score), whatever kind the config names."""

    def __init__(self, scorer: Any):
        self.scorer, self.name = scorer, getattr(scorer, "name", type(scorer).__name__)
        self.score = scorer.score
        self._text = getattr(scorer, "score_text", None)

    def score_text(self, text: str) -> float:
        if self._text is not None:
            return float(self._text(text))
        return float(self.scorer.score([{"role": "user", "content": text}]).value)


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
