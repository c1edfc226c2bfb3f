"""The published DiffusionGemma's architecture (`google/diffusiongemma-26B-A4B-it`), as config values.

It shares Gemma 4 26B-A4B's text backbone: 30 layers in a 5:1 sliding/full pattern, wider
full-attention heads (`global_head_dim`) with their own KV heads, 128 experts of which 8 are active,
tied embeddings, a 262k vocabulary, a Gemma 4 vision tower, and image tokens attending both ways
(`use_bidirectional_attention: "vision"`). The tiny test model keeps this structure at toy sizes;
`benchmarks/engine.py --size full` builds it at full size with random weights (no download).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PUBLISHED_TEXT", "published_config"]

PUBLISHED_TEXT: dict[str, Any] = {
    "vocab_size": 262_144,
    "hidden_size": 2816,
    "intermediate_size": 2112,
    "num_hidden_layers": 30,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_global_key_value_heads": 2,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_experts": 128,
    "top_k_experts": 8,
    "moe_intermediate_size": 704,
    "sliding_window": 1024,
    "max_position_embeddings": 262_144,
    "use_bidirectional_attention": "vision",
    "tie_word_embeddings": True,
}


def published_config() -> Any:
    """A DiffusionGemmaConfig with the published shapes (transformers' defaults for the rest)."""
    from transformers import DiffusionGemmaConfig

    return DiffusionGemmaConfig(text_config=dict(PUBLISHED_TEXT), vision_config={"model_type": "gemma4_vision"},
                                canvas_length=256, tie_word_embeddings=True)
