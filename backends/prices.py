"""Prompt-cache prices a config did not give: from litellm's offline price map where it knows
the model, else the providers' usual multiples of the input price (Anthropic: reads 0.1x,
writes 1.25x; others: reads 0.1x, writes 1x).

The map (backends/model_map.py) is read only when an answer first reports cached tokens for a
backend with no cache prices: `route --explain` and requests without caching never pay for it.

Also the long-context price (`with_long_context`): what a beta that opens a 1M context costs,
so the kind that counts it may send it (backends/client_fields.py).
"""

from __future__ import annotations

import dataclasses

from backends.model_map import model_entry
from backends.types import Price, Usage

__all__ = ["COUNTED_BETAS", "LONG_CONTEXT", "with_cache_prices", "with_long_context"]

# (read, write) as multiples of the input price, when the map does not know the model.
_MULTIPLES = {"anthropic": (0.1, 1.25)}
_DEFAULT_MULTIPLES = (0.1, 1.0)


def _known(model: str) -> tuple[float | None, float | None]:
    """(read, write) dollars per million tokens from litellm's map, each None where unknown."""
    entry = model_entry(model)

    def per_mtok(key: str) -> float | None:
        value = entry.get(key)
        return float(value) * 1e6 if isinstance(value, (int, float)) else None

    return per_mtok("cache_read_input_token_cost"), per_mtok("cache_creation_input_token_cost")


def with_cache_prices(price: Price, model: str, kind: str) -> Price:
    """`price` with its cache prices filled in where the config left them out."""
    if price.caches_known:
        return price
    read, write = _known(model) if price.input_per_mtok else (None, None)
    read_x, write_x = _MULTIPLES.get(kind, _DEFAULT_MULTIPLES)
    return dataclasses.replace(
        price,
        cache_read_per_mtok=price.cache_read_per_mtok if price.cache_read_per_mtok is not None
        else read if read is not None else price.input_per_mtok * read_x,
        cache_write_per_mtok=price.cache_write_per_mtok if price.cache_write_per_mtok is not None
        else write if write is not None else price.input_per_mtok * write_x,
    )


# Anthropic bills a request whose input passes 200k tokens (only a 1M-context one can: the
# `context-1m-...` beta, or a 1M model) at twice the input price, cache reads and writes
# included, and 1.5x the output price: (threshold in input tokens, input x, output x) per kind.
LONG_CONTEXT = {"anthropic": (200_000, 2.0, 1.5)}
# The price-changing betas (backends/client_fields.py PRICED_BETAS) each kind's cost counts.
COUNTED_BETAS = {"anthropic": ("context-1m-",)}


def with_long_context(cost: float, usage: Usage, output_per_mtok: float, kind: str) -> float:
    """`cost` (the plain price of `usage`) at the kind's long-context price when the input
    passed its threshold."""
    rule = LONG_CONTEXT.get(kind)
    if rule is None or usage.input_tokens <= rule[0]:
        return cost
    output = usage.output_tokens * output_per_mtok / 1e6
    return (cost - output) * rule[1] + output * rule[2]
