"""What litellm's offline model map knows about a model (prices, output limit), read without
importing litellm: the map is a 3.5 MB JSON file inside the package, parsed once, on first use,
and never on `route --help` or `route --explain`.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

__all__ = ["model_entry"]

# What the router reads from an entry; the rest of the map is dropped once parsed.
_KEPT = ("max_output_tokens", "max_input_tokens", "cache_read_input_token_cost", "cache_creation_input_token_cost")


@functools.cache
def _model_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(folder, "model_prices_and_context_window_backup.json")
        if os.path.exists(path):
            import orjson

            with open(path, "rb") as file:
                data = orjson.loads(file.read())
            if not isinstance(data, dict):
                return {}
            return {model: {key: entry[key] for key in _KEPT if key in entry}
                    for model, entry in data.items() if isinstance(entry, dict)}
    return {}


def model_entry(model: str) -> dict[str, Any]:
    """The map's entry for `model` (with or without its provider prefix); {} when unknown or
    when litellm is not installed."""
    known = _model_map()
    entry = known.get(model) or known.get(model.split("/", 1)[-1])
    return entry if isinstance(entry, dict) else {}
