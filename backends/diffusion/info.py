"""What a DiffusionGemma checkpoint is and how much memory it needs, without loading its weights,
and without torch or transformers: a vLLM user runs `route engine info` to get the serve command.

Everything comes from files: config.json (with transformers' defaults for the keys it leaves out,
as `save_pretrained` does for defaults) and the safetensors headers, whose tensor shapes give the
parameter count exactly. Memory figures are estimates (weights, plus the KV cache and the
per-step logits a canvas needs), in bytes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from backends.diffusion.load import EngineSetupError, read_config_json
from backends.diffusion.vision import checkpoint_has_vision

__all__ = ["PUBLISHED_ID", "VLLM_FLAGS", "describe", "kv_bytes_per_token", "stored_parameters", "vllm_advice",
           "vllm_command"]

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

# transformers' DiffusionGemmaTextConfig defaults: config.json leaves out what equals them.
_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_144, "hidden_size": 2304, "num_hidden_layers": 30, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131_072, "sliding_window": 512,
    "num_experts": None, "top_k_experts": None, "global_head_dim": 512, "num_global_key_value_heads": None,
}
_SLIDING_PATTERN = 6  # transformers' default layer_types: five sliding-window layers, then a full one
# Saved with the weights but a buffer, not a parameter (one scalar per layer).
_BUFFERS = (".layer_scalar",)
_MAX_HEADER = 100_000_000  # bytes; safetensors' own limit


def _text(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("text_config") or {}
    return {**_TEXT_DEFAULTS, **{k: v for k, v in text.items() if k in _TEXT_DEFAULTS or k in
                                 ("layer_types", "per_layer_config", "attention_k_eq_v")}}


def _layer_types(text: dict[str, Any]) -> list[str]:
    types = list(text.get("layer_types") or [
        "sliding_attention" if (i + 1) % _SLIDING_PATTERN else "full_attention" for i in range(text["num_hidden_layers"])])
    if types:
        types[-1] = "full_attention"  # as transformers forces it
    return types


def kv_bytes_per_token(text: dict[str, Any], bytes_per_value: int = 2) -> int:
    """Keys and values, every layer, one token, in bfloat16. Full-attention layers are wider (Gemma 4's
    `global_head_dim`) with their own KV heads: each layer's shape is its `per_layer_config` entry
    when the file has one, else what transformers derives for full-attention layers."""
    overrides = text.get("per_layer_config")
    if overrides is not None:  # keys are layer numbers as strings, zero-padded to the widest ("05")
        overrides = {int(index): layer for index, layer in overrides.items()}
    full = {"head_dim": text["global_head_dim"]}
    if text.get("num_global_key_value_heads") is not None and text.get("attention_k_eq_v", True):
        full["num_key_value_heads"] = text["num_global_key_value_heads"]
    total = 0
    for index, kind in enumerate(_layer_types(text)):
        if overrides is not None:
            layer = {**text, **overrides.get(index, {})}
        else:
            layer = {**text, **(full if kind == "full_attention" else {})}
        total += 2 * layer["num_key_value_heads"] * layer["head_dim"] * bytes_per_value
    return total


def _header(path: Path) -> dict[str, Any]:
    """A safetensors file's JSON header: 8 bytes of length (little-endian), then the JSON."""
    try:
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= _MAX_HEADER:
                raise ValueError(f"header length {size}")
            header = json.loads(f.read(size))
    except (OSError, ValueError) as exc:
        raise EngineSetupError(f"{path} is not a readable safetensors file ({exc}); download it again.") from None
    return header if isinstance(header, dict) else {}


def stored_parameters(directory: Path) -> int | None:
    """Parameters in the checkpoint's *.safetensors files, from their headers' shapes (no tensor
    is read); None when the weights are not all there (none, or a shard the index names is missing)."""
    files = sorted(directory.glob("*.safetensors"))
    if not files or _shard_missing(directory):
        return None
    return sum(math.prod(spec.get("shape") or [1]) for path in files for name, spec in _header(path).items()
               if name != "__metadata__" and not name.endswith(_BUFFERS))


def _shard_missing(directory: Path) -> bool:
    """A shard the index names is not on disk (a download cut short)."""
    index = directory / "model.safetensors.index.json"
    try:
        shards = set(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values())
    except (OSError, ValueError):
        return False  # no index (one file), or none to go by
    return any(not (directory / shard).is_file() for shard in shards)


def describe(model_ref: str) -> dict[str, Any]:
    """Config highlights and memory estimates for the checkpoint at `model_ref` (dir or cached hub id)."""
    directory, config = read_config_json(model_ref)
    text = _text(config)
    params = stored_parameters(directory)
    canvas = int(config.get("canvas_length") or 256)
    on_disk = sum(f.stat().st_size for f in directory.glob("*.safetensors")) or None
    return {
        "model": model_ref,
        "model_type": config["model_type"],
        "parameters": params,
        "canvas_length": canvas,
        "vocab_size": text["vocab_size"],
        "hidden_size": text["hidden_size"],
        "layers": text["num_hidden_layers"],
        "attention_heads": text["num_attention_heads"],
        "experts": text["num_experts"] or 0,
        "experts_per_token": text["top_k_experts"],
        "sliding_window": text["sliding_window"],
        "max_position_embeddings": text["max_position_embeddings"],
        "weights_bytes": {name: int(params * b) for name, b in _BYTES_PER_PARAM.items()} if params else {},
        "weights_on_disk_bytes": on_disk,
        "kv_cache_bytes_per_1k_tokens": 1000 * kv_bytes_per_token(text),
        # The sampler keeps float32 logits for the whole canvas at every step (self-conditioning).
        "canvas_logits_bytes": canvas * text["vocab_size"] * 4,
        "images": checkpoint_has_vision(model_ref),  # a vision tower and an image processor config
        "serve_with_vllm": vllm_advice(model_ref),
    }


def vllm_command(model_ref: str = PUBLISHED_ID) -> str:
    """The `vllm serve` line for this checkpoint. A local directory is served under the published id,
    so a config naming `google/diffusiongemma-26B-A4B-it` reaches it unchanged."""
    flags = " ".join(flag for flag, _why in VLLM_FLAGS)
    name = "" if model_ref == PUBLISHED_ID else f" --served-model-name {PUBLISHED_ID}"
    return f"vllm serve {model_ref}{name} {flags}"


def vllm_advice(model_ref: str = PUBLISHED_ID) -> list[str]:
    """The command, then one line per flag saying why it is there."""
    return [vllm_command(model_ref), *(f"{flag}: {why}" for flag, why in VLLM_FLAGS)]


