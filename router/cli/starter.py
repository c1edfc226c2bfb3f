"""The starter config `route init` writes: the backends a user picked, tiers over them, comments.

Each backend is one block of YAML with the comment a newcomer needs; tiers go from the local
model up to the frontier one, so the shape matches the shipped config.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHOICES", "Choice", "starter_config"]


@dataclass(frozen=True)
class Choice:
    name: str
    question: str
    tier: str  # local | fast-hosted | frontier
    block: str
    default: bool


CHOICES: tuple[Choice, ...] = (
    Choice("diffusiongemma", "DiffusionGemma on this machine (vLLM or `route engine serve`, port 8000)", "local", """\
  # DiffusionGemma behind an OpenAI-compatible server: `vllm serve ...` or `route engine serve`.
  diffusiongemma:
    kind: openai
    model: google/diffusiongemma-26B-A4B-it
    base_url: http://127.0.0.1:8000/v1
    decoding: diffusion        # time and cost are per 256-token canvas, not per token
    latency: {canvas_ms: 250}  # a prior until real requests have been measured
""", True),
    Choice("mercury-2", "Inception's Mercury 2 (hosted; needs INCEPTION_API_KEY)", "fast-hosted", """\
  # Inception's Mercury 2: a hosted diffusion model. `export INCEPTION_API_KEY=...`
  mercury-2:
    kind: openai
    model: mercury-2
    base_url: https://api.inceptionlabs.ai/v1
    api_key: ${INCEPTION_API_KEY}
    decoding: diffusion
    price: {input: 0.25, output: 0.75, cache_read: 0.025}
    latency: {ttft_ms: 400, canvas_ms: 200}
""", True),
    Choice("frontier", "a frontier model over Anthropic's Messages API (needs ANTHROPIC_API_KEY)", "frontier", """\
  # Called directly (no SDK, no litellm). Other providers: `kind: litellm` with any litellm model
  # string (gemini/..., bedrock/...), which pays litellm's import on first use.
  # `export ANTHROPIC_API_KEY=...`
  frontier:
    kind: anthropic
    model: claude-sonnet-4-5
    api_key: ${ANTHROPIC_API_KEY}
    price: {input: 3.0, output: 15.0, cache_read: 0.30, cache_write: 3.75}
    latency: {ttft_ms: 900, tokens_per_s: 60}
""", True),
    Choice("sim", "the SIMULATED server (`route sim`, port 8000; fake answers, for trying things)", "local", """\
  # `route sim` in another terminal answers as any model, with fake text labelled SIMULATED.
  sim:
    kind: openai
    model: sim-local
    base_url: http://127.0.0.1:8000/v1
""", False),
)

_TIER_ORDER = ("local", "fast-hosted", "frontier")
_BELOW = {"local": "0.45", "fast-hosted": "calibrated"}


def _tiers(chosen: list[Choice]) -> str:
    groups = [(tier, [c.name for c in chosen if c.tier == tier]) for tier in _TIER_ORDER]
    groups = [(tier, names) for tier, names in groups if names]
    lines = []
    for i, (tier, names) in enumerate(groups):
        below = "" if i == len(groups) - 1 else f"below: {_BELOW[tier]}, "
        lines.append(f"    - {{name: {tier}, {below}backends: [{', '.join(names)}]}}")
    return "\n".join(lines)


def starter_config(names: list[str]) -> str:
    """The YAML text for these backends (names from CHOICES, in any order)."""
    chosen = [c for c in CHOICES if c.name in names]
    blocks = "\n".join(c.block for c in chosen)
    return f"""\
# route: written by `route init`. `route config show` prints the config in use, `route doctor`
# checks each backend, `route --explain "prompt"` shows how a prompt would be routed.
# Keys never live here: `api_key: ${{NAME}}` names the environment variable that holds one.
# Prices are US dollars per million tokens. The shipped config.yaml documents every option.

backends:
{blocks}
routing:
  # Scores a prompt offline, in microseconds: 0 = trivial, 1 = needs the strongest model.
  scorer: {{kind: learned}}
  # Score bands, lowest first; the last tier takes the rest. If a tier fails, the next one up answers.
  tiers:
{_tiers(chosen)}
  prefer: cheap              # cheap | fast | best

# spend:
#   cap_usd: 20              # refuse new requests once the logged spend in the window reaches this
#   window_days: 30
"""
