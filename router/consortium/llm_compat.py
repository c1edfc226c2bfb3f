"""llm-consortium's vocabulary in ours: its `-m MODEL:N` / `-n N` members, its judging names and
its percent confidence, and the JSON its `consortium_configs` table holds (version 0.8).

llm-consortium 0.8 saves a consortium as one row `(name, config, created_at)` whose `config` is
the JSON of its pydantic ConsortiumConfig, e.g.

    {"models": {"glm-5.2": 5}, "arbiter": "mercury-2", "judging_method": "rank",
     "confidence_threshold": 0.8, "max_iterations": 3, "minimum_iterations": 1,
     "system_prompt": null, "strategy": "default", "strategy_params": {}, ...}

`judging_method` "default" is its synthesis. A saved consortium is a model there, so a member or
arbiter may name another saved consortium: nesting comes across as names, as ours does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

__all__ = ["JUDGING", "entry_from_llm_consortium", "judging_of", "members_of", "threshold_of"]

# llm-consortium's --judging-method values (and ours) to ours
JUDGING = {"rank": "rank", "synthesis": "synthesis", "default": "synthesis"}


def judging_of(value: str) -> str:
    """`rank`, `synthesis`, or llm-consortium's `default` (its synthesis); ValueError otherwise."""
    judging = JUDGING.get(value.strip().lower())
    if judging is None:
        raise ValueError(f"the judging method must be rank or synthesis (llm-consortium's `default` is synthesis); "
                         f"got {value!r}")
    return judging


def threshold_of(value: float) -> float:
    """A confidence threshold as 0..1; llm-consortium also takes a percent (80 is 0.8)."""
    if 1.0 < value <= 100.0:
        return value / 100.0
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"the confidence threshold must be 0..1 (or a percent, 0..100); got {value:g}")
    return value


def members_of(models: list[str], count: int, known: Collection[str] = ()) -> list[str]:
    """`-m` values with llm-consortium's `-n` default count, as our short forms (`NAME*N`).

    Each value is `NAME`, `NAME*N` (ours) or `NAME:N` (llm-consortium's): a trailing `:N` of digits
    is a count unless the whole value is a name in `known` (an Ollama tag such as `qwen:7`
    names a model). A name given twice adds up, as llm-consortium does."""
    totals: dict[str, int] = {}
    for value in models:
        name, n = _split(value.strip(), count, known)
        totals[name] = totals.get(name, 0) + n
    return [name if n == 1 else f"{name}*{n}" for name, n in totals.items()]


def _split(value: str, count: int, known: Collection[str]) -> tuple[str, int]:
    if "*" in value:
        name, _, n = value.rpartition("*")
        return name.strip(), int(n) if n.strip().isdigit() else count
    name, colon, n = value.rpartition(":")
    if colon and n.isdigit() and name and value not in known:
        return name, int(n)
    return value, count


def _threshold_setting(value: Any) -> float:
    return threshold_of(float(value))


# their numeric setting -> our key, and how its value reads as ours
_NUMBERS: tuple[tuple[str, str, Callable[[Any], float | int]], ...] = (
    ("confidence_threshold", "confidence_threshold", _threshold_setting),
    ("minimum_iterations", "min_iterations", int),
    ("max_iterations", "max_iterations", int))


def _require_models_and_arbiter(config: dict[str, Any]) -> None:
    models = config.get("models") or {}
    if not isinstance(models, dict) or not models:
        raise ValueError("it has no models")
    if not config.get("arbiter"):
        raise ValueError("it has no arbiter (llm-consortium then uses its first model; name one with --arbiter)")


def _numbers(config: dict[str, Any]) -> dict[str, float | int]:
    return {ours: read(config[theirs]) for theirs, ours, read in _NUMBERS if config.get(theirs) is not None}


def _left_out(config: dict[str, Any]) -> list[str]:
    """A note for each of its settings that has no counterpart here."""
    notes = []
    strategy = config.get("strategy") or "default"
    if strategy != "default":
        notes.append(f"strategy {strategy!r} has no counterpart here (members answer, the arbiter judges); left out")
    if config.get("embedding_backend") or config.get("embedding_model"):
        notes.append("embedding settings have no counterpart here; left out")
    return notes


def entry_from_llm_consortium(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A `consortia:` entry from one saved llm-consortium config, and notes on what has no
    counterpart here (a strategy other than default, embeddings): those are left out."""
    _require_models_and_arbiter(config)
    members = [name if int(n) == 1 else f"{name}*{int(n)}" for name, n in config["models"].items()]
    entry: dict[str, Any] = {"members": members, "arbiter": str(config["arbiter"]),
                             "judging": judging_of(str(config.get("judging_method") or "default"))}
    if config.get("system_prompt"):
        entry["system"] = str(config["system_prompt"])
    entry.update(_numbers(config))
    return entry, _left_out(config)
