"""The starter config `route init` writes: the backends a user picked, tiers over them, comments.

Each backend is one block of YAML with the comment a newcomer needs -- the shipped three, the
simulator, and a block for each common provider and local server (docs/guide/providers.md shows
the same blocks); tiers go from the local model up to the frontier one, so the shape matches the
shipped config.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHOICES", "PROVIDERS", "STARTERS", "Choice", "starter_config"]


@dataclass(frozen=True)
class Choice:
    name: str
    question: str
    tier: str  # local | fast-hosted | frontier
    block: str
    default: bool


# What `route init` asks about one by one: the shipped config's backends and the simulator.
STARTERS: tuple[Choice, ...] = (
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

# Every common provider and local server, offered by name (`route init --backend NAME`, or the
# question after the starters); docs/guide/providers.md shows each block as it is here.
PROVIDERS: tuple[Choice, ...] = (
    # Hosted providers. An OpenAI-compatible API is called directly (`kind: openai`: httpx, no
    # litellm); the others through litellm (`kind: litellm`), imported on first use (seconds).
    Choice("openai", "OpenAI (needs OPENAI_API_KEY)", "frontier", """\
  # OpenAI. `export OPENAI_API_KEY=...`
  openai:
    kind: openai
    model: gpt-5
    base_url: https://api.openai.com/v1
    api_key: ${OPENAI_API_KEY}
    price: {input: 1.25, output: 10.0}
""", False),
    Choice("anthropic", "Anthropic, a second Claude model (needs ANTHROPIC_API_KEY)", "frontier", """\
  # Anthropic's Messages API, called directly. `export ANTHROPIC_API_KEY=...`
  anthropic:
    kind: anthropic
    model: claude-haiku-4-5
    api_key: ${ANTHROPIC_API_KEY}
    price: {input: 1.0, output: 5.0}
""", False),
    Choice("gemini", "Google Gemini (through litellm; needs GEMINI_API_KEY)", "fast-hosted", """\
  # Gemini through litellm (`gemini/` models; prices from litellm's map). `export GEMINI_API_KEY=...`
  gemini:
    kind: litellm
    model: gemini/gemini-2.5-flash
    api_key: ${GEMINI_API_KEY}
""", False),
    Choice("bedrock", "AWS Bedrock (through litellm; needs AWS credentials)", "frontier", """\
  # Bedrock through litellm (`bedrock/` models), which reads AWS_ACCESS_KEY_ID,
  # AWS_SECRET_ACCESS_KEY and AWS_REGION_NAME (or an AWS profile) from the environment itself.
  bedrock:
    kind: litellm
    model: bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0
""", False),
    Choice("azure", "Azure OpenAI (through litellm; needs AZURE_API_KEY and AZURE_RESOURCE)", "frontier", """\
  # Azure OpenAI through litellm: `azure/` and your deployment's name.
  # `export AZURE_API_KEY=...` and AZURE_RESOURCE=the name of your Azure OpenAI resource.
  azure:
    kind: litellm
    model: azure/gpt-5
    base_url: https://${AZURE_RESOURCE}.openai.azure.com
    api_key: ${AZURE_API_KEY}
    passthrough: {api_version: "2024-10-21"}
""", False),
    Choice("openrouter", "OpenRouter (needs OPENROUTER_API_KEY)", "frontier", """\
  # OpenRouter's OpenAI-compatible API: any model it lists. `export OPENROUTER_API_KEY=...`
  openrouter:
    kind: openai
    model: anthropic/claude-sonnet-4.5
    base_url: https://openrouter.ai/api/v1
    api_key: ${OPENROUTER_API_KEY}
    price: {input: 3.0, output: 15.0}
""", False),
    Choice("groq", "Groq (needs GROQ_API_KEY)", "fast-hosted", """\
  # Groq's OpenAI-compatible API. `export GROQ_API_KEY=...`
  groq:
    kind: openai
    model: openai/gpt-oss-120b
    base_url: https://api.groq.com/openai/v1
    api_key: ${GROQ_API_KEY}
    price: {input: 0.15, output: 0.6}
""", False),
    Choice("mistral", "Mistral (needs MISTRAL_API_KEY)", "fast-hosted", """\
  # Mistral's OpenAI-compatible API. `export MISTRAL_API_KEY=...`
  mistral:
    kind: openai
    model: mistral-large-latest
    base_url: https://api.mistral.ai/v1
    api_key: ${MISTRAL_API_KEY}
    price: {input: 0.5, output: 1.5}
""", False),
    # Servers on this machine, each OpenAI-compatible on its default port; no key.
    Choice("ollama", "Ollama on this machine (port 11434)", "local", """\
  # Ollama: `ollama pull llama3.2`, then it serves on port 11434.
  ollama:
    kind: openai
    model: llama3.2
    base_url: http://127.0.0.1:11434/v1
""", False),
    Choice("vllm", "a model served by vLLM on this machine (port 8000)", "local", """\
  # vLLM: `vllm serve Qwen/Qwen3-8B` serves that exact name on port 8000.
  vllm:
    kind: openai
    model: Qwen/Qwen3-8B
    base_url: http://127.0.0.1:8000/v1
""", False),
    Choice("lm-studio", "LM Studio's server on this machine (port 1234)", "local", """\
  # LM Studio: its local server (Developer tab, or `lms server start`) on port 1234.
  lm-studio:
    kind: openai
    model: qwen/qwen3-8b
    base_url: http://127.0.0.1:1234/v1
""", False),
    Choice("llama-cpp", "llama.cpp's llama-server on this machine (port 8080)", "local", """\
  # llama.cpp: `llama-server -m model.gguf` on port 8080 answers with the model it loaded.
  llama-cpp:
    kind: openai
    model: local-gguf
    base_url: http://127.0.0.1:8080/v1
""", False),
)

CHOICES: tuple[Choice, ...] = STARTERS + PROVIDERS

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
