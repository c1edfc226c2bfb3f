"""The offline prompt-complexity scorer: hand-designed features plus learned word weights.

`ComplexityScorer.load()` reads the shipped weights (`weights.json`: hand-set general priors and
confined word weights fitted on the RouteLLM GSM8K and MMLU records); scoring needs no model
call, no network and nothing beyond the standard library. Fitting code lives in `training/`
(`route calibrate`, `python -m policies.complexity.training.fit`), never imported here.
"""

from policies.complexity.model import DEFAULT_WEIGHTS, ComplexityScorer, Weights

__all__ = ["DEFAULT_WEIGHTS", "ComplexityScorer", "Weights"]
