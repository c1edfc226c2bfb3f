"""The offline prompt-complexity scorer: hand-designed features plus learned word weights.

`ComplexityScorer.load()` reads the shipped weights (`weights.json`, fitted on the RouteLLM
GSM8K and MMLU records by `python -m policies.complexity.fit`); scoring needs no model call,
no network and nothing beyond the standard library.
"""

from policies.complexity.model import DEFAULT_WEIGHTS, ComplexityScorer, Weights

__all__ = ["DEFAULT_WEIGHTS", "ComplexityScorer", "Weights"]
