"""What a DiffusionGemma checkpoint is and how much memory it needs, without loading its weights.

The parameter count comes from building the model on torch's `meta` device (shapes only, no
memory), so it is exact for any config; memory figures are estimates (weights, plus the KV cache
and the per-step logits a canvas needs), in bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.diffusion.load import import_engine, read_config
from backends.diffusion.vision import checkpoint_has_vision

__all__ = ["PUBLISHED_ID", "VLLM_FLAGS", "describe", "vllm_advice", "vllm_command"]

PUBLISHED_ID = "google/diffusiongemma-26B-A4B-it"  # mind the case: vLLM serves exactly this name

# vLLM's published recipe for DiffusionGemma: each flag, and why it is needed.
VLLM_FLAGS: tuple[tuple[str, str], ...] = (
    ("--max-num-seqs 4", "diffusion state buffers are max-num-seqs x canvas length x the 262k vocabulary; "
                         "vLLM's default of 256 sequences runs out of memory"),
    ("--generation-config vllm", "the checkpoint's generation_config.json sets max_tokens: 256, which would "
                                 "otherwise override every request's own limit"),
    ("--gpu-memory-utilization 0.8", "leaves room for those buffers outside vLLM's KV-cache pool"),
)

_BYTES_PER_PARAM = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "int8": 1.0, "4-bit": 0.5}


def _kv_bytes_per_token(text: Any, bytes_per_value: int = 2) -> int:
    """Keys and values, every layer, one token, in bfloat16. Full-attention layers are wider (Gemma 4's
    `global_head_dim`), so each layer's shape is read from its own view: the global `head_dim` is
    ambiguous there and transformers refuses to give it."""
    total = 0
    for index in range(len(text.layer_types)):
        layer = text.per_layer_config[index]
        total += 2 * layer.num_key_value_heads * layer.head_dim * bytes_per_value
    return total


def vllm_command(model_ref: str = PUBLISHED_ID) -> str:
    """The `vllm serve` line for this checkpoint. A local directory is served under the published id,
    so a config naming `google/diffusiongemma-26B-A4B-it` reaches it unchanged."""
    flags = " ".join(flag for flag, _why in VLLM_FLAGS)
    name = "" if model_ref == PUBLISHED_ID else f" --served-model-name {PUBLISHED_ID}"
    return f"vllm serve {model_ref}{name} {flags}"


def vllm_advice(model_ref: str = PUBLISHED_ID) -> list[str]:
    """The command, then one line per flag saying why it is there."""
    return [vllm_command(model_ref), *(f"{flag}: {why}" for flag, why in VLLM_FLAGS)]


def describe(model_ref: str) -> dict[str, Any]:
    """Config highlights and memory estimates for the checkpoint at `model_ref` (dir or cached hub id)."""
    torch, transformers = import_engine()
    config = read_config(model_ref)
    with torch.device("meta"):
        model = transformers.DiffusionGemmaForBlockDiffusion(config)
    params = sum(p.numel() for p in model.parameters())
    text = config.text_config
    experts = text.num_experts or 0
    canvas = int(config.canvas_length)
    path = Path(model_ref).expanduser()
    on_disk = sum(f.stat().st_size for f in path.glob("*.safetensors")) if path.is_dir() else None
    return {
        "model": model_ref,
        "model_type": config.model_type,
        "parameters": params,
        "canvas_length": canvas,
        "vocab_size": text.vocab_size,
        "hidden_size": text.hidden_size,
        "layers": text.num_hidden_layers,
        "attention_heads": text.num_attention_heads,
        "experts": experts,
        "experts_per_token": text.top_k_experts,
        "sliding_window": text.sliding_window,
        "max_position_embeddings": text.max_position_embeddings,
        "weights_bytes": {name: int(params * b) for name, b in _BYTES_PER_PARAM.items()},
        "weights_on_disk_bytes": on_disk,
        "kv_cache_bytes_per_1k_tokens": 1000 * _kv_bytes_per_token(text),
        # The sampler keeps float32 logits for the whole canvas at every step (self-conditioning).
        "canvas_logits_bytes": canvas * text.vocab_size * 4,
        "images": checkpoint_has_vision(model_ref),  # a vision tower and an image processor config
        "serve_with_vllm": vllm_advice(model_ref),
    }
