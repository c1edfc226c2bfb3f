"""A tiny DiffusionGemma checkpoint with random weights and a locally trained tokenizer.

For tests and benchmarks that need the real transformers engine on a CPU without downloading
anything: `build_tiny_checkpoint(dir)` writes config, weights, generation config, a tokenizer
with a chat template and an image processor config, in the same layout as a real checkpoint, so
the same loader reads both.
The answers are word salad (the weights are random) and never end early (the EOS logit is pinned
below the rest); the engine, sampler and streamer are real.
Needs the `local` extra (torch, transformers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["TINY_CANVAS_LENGTH", "build_tiny_checkpoint"]

TINY_CANVAS_LENGTH = 16  # token slots per canvas; real DiffusionGemma uses 256

# Ids 0-2 match DiffusionGemma's text config defaults (pad, eos, bos).
# Gemma 4's thinking and tool-call delimiters are special tokens too, as in the published tokenizer.
_MARKERS = ["<|think|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>']
_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<image>", "<boi>", "<eoi>",
            *_MARKERS]

_CORPUS = [
    "the sky is blue because air scatters short waves of sunlight more than long ones",
    "a router sends each prompt to the fastest model that is good enough",
    "diffusion models write a whole canvas of tokens at once and refine it step by step",
    "write a python function that adds two numbers and returns the sum",
    "hello world this is a tiny model with random weights so its answers are noise",
    "why is the sea salty what makes rain fall how do birds fly",
    "user model system assistant answer question please thanks yes no maybe",
]

# Gemma's turn format, reduced to what a WordLevel tokenizer can round-trip.
# `enable_thinking` is Gemma 4's switch: it adds `<|think|>` to the prompt; declared tools get a turn each.
# Content is a string, or (with images) Gemma's parts, an image part becoming the image token.
_CHAT_TEMPLATE = (
    "{{ bos_token }}{% if enable_thinking %}<|think|>{% endif %}"
    "{% for tool in tools or [] %}<start_of_turn>system {{ tool['function']['name'] }}<end_of_turn>{% endfor %}"
    "{% for message in messages %}<start_of_turn>{{ message['role'] }} "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }} {% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model {% endif %}"
)
_SOFT_TOKENS = 70  # per image: the fewest Gemma 4's image processor allows (the published default is 280)


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(_CORPUS, trainers.WordLevelTrainer(special_tokens=_SPECIAL))
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        additional_special_tokens=_SPECIAL[4:],
        chat_template=_CHAT_TEMPLATE,
    )


def _config(tokenizer, canvas_length: int, layers: int, hidden: int, bidirectional: str | None = "vision"):
    """The published config's structure at toy sizes: the 5:1 sliding/full layer pattern (from
    transformers' default `layer_types`), wider full-attention heads with their own KV heads, a
    mixture of experts, tied embeddings, a Gemma 4 vision tower, and `"vision"` bidirectional
    attention (image tokens attend both ways; text stays causal in the encoder)."""
    from transformers import DiffusionGemmaConfig

    ids = tokenizer.convert_tokens_to_ids
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        global_head_dim=32,
        num_global_key_value_heads=1,
        max_position_embeddings=2048,
        sliding_window=64,
        num_experts=4,
        top_k_experts=2,
        moe_intermediate_size=hidden,
        use_bidirectional_attention=bidirectional,
        tie_word_embeddings=True,
        pad_token_id=ids("<pad>"),
        eos_token_id=ids("<eos>"),
        bos_token_id=ids("<bos>"),
    )
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=8)
    return DiffusionGemmaConfig(
        text_config=text,
        vision_config=vision,
        canvas_length=canvas_length,
        image_token_id=ids("<image>"),
        boi_token_id=ids("<boi>"),
        eoi_token_id=ids("<eoi>"),
        tie_word_embeddings=True,
    )


def _processor_config(vision: Any) -> dict[str, Any]:
    """processor_config.json as Gemma 4 checkpoints ship it (the image half; no audio or video here)."""
    image = dict(image_processor_type="Gemma4ImageProcessor", do_convert_rgb=True, do_resize=True, resample=3,
                 do_rescale=True, rescale_factor=1 / 255, do_normalize=False, image_mean=[0.0, 0.0, 0.0],
                 image_std=[1.0, 1.0, 1.0], patch_size=vision.patch_size, pooling_kernel_size=vision.pooling_kernel_size,
                 max_soft_tokens=_SOFT_TOKENS)
    return {"processor_class": "Gemma4Processor", "image_seq_length": _SOFT_TOKENS, "image_processor": image}


def build_tiny_checkpoint(path: str | Path, *, canvas_length: int = TINY_CANVAS_LENGTH, layers: int = 6,
                          hidden: int = 32, max_denoising_steps: int = 8, seed: int = 0,
                          bidirectional: str | None = "vision", image_processor: bool = True) -> Path:
    """Write a random-weight DiffusionGemma (well under a million parameters), its tokenizer and,
    unless `image_processor=False` (a text-only checkpoint), its image processor config to `path`.

    The generation config keeps DiffusionGemma's published defaults except `max_denoising_steps`,
    lowered so a test's canvas costs a handful of forward passes. Returns the directory.
    """
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(_config(tokenizer, canvas_length, layers, hidden, bidirectional)).eval()
    with torch.no_grad():
        # Random logits are about +-0.1; a zero EOS row scores 0, below the best of ~90 other tokens
        # with certainty, so the argmax never ends an answer early: every run writes exactly
        # ceil(max_new_tokens / canvas_length) canvases, which keeps tests and benchmarks comparable.
        model.lm_head.weight[tokenizer.eos_token_id].zero_()
        # Likewise the thinking and tool-call markers: word salad never opens a thought or a call
        # (those paths are tested on scripted text), as a real model writes them only on purpose.
        for marker in _MARKERS:
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(marker)].zero_()
    model.generation_config = DiffusionGemmaGenerationConfig(
        max_new_tokens=4 * canvas_length,
        max_denoising_steps=max_denoising_steps,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if image_processor:
        processor = _processor_config(model.config.vision_config)
        (out / "processor_config.json").write_text(json.dumps(processor, indent=2) + "\n", encoding="utf-8")
    return out
