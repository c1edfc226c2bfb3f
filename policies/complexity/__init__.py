"""The offline prompt-complexity scorer: hand-designed features, optionally learned word weights.

`ComplexityScorer.load()` reads the shipped weights (`weights.json`: the recipe that did best
leaving one dataset out, `training.learn.GENERAL`, refit on every shared routing set); scoring
needs no model call, no network and nothing beyond the standard library. Fitting code lives in `training/`
(`route calibrate`, `python -m policies.complexity.training.fit`), never imported here.
"""

from policies.complexity.model import DEFAULT_WEIGHTS, ComplexityScorer, Weights

__all__ = ["DEFAULT_WEIGHTS", "ComplexityScorer", "Weights"]
