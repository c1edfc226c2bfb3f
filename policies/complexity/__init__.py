"""The offline prompt-complexity scorer: hand-designed features plus learned word weights.

`ComplexityScorer.load()` reads the shipped weights (`weights.json`, fitted on every shared
routing set with the options that did best leaving one dataset out, by
`python -m policies.complexity.training.fit`); scoring needs no model call, no network and
nothing beyond the standard library. Fitting code lives in `training/`, never imported here.
"""

from policies.complexity.model import DEFAULT_WEIGHTS, ComplexityScorer, Weights

__all__ = ["DEFAULT_WEIGHTS", "ComplexityScorer", "Weights"]
