"""Workarounds for transformers' DiffusionGemma, each with the upstream problem it works around.

`use_bidirectional_attention: "all"` crashes `generate()` in transformers 5.24 with
`sdpa_attention_forward() got multiple values for keyword argument 'is_causal'`: the config sets
`is_causal = False` (huggingface/transformers#46077, fixed for the masks by #46079), the generic
`merge_with_config_defaults` wrapper then injects `is_causal` into the forward kwargs, and
`DiffusionGemmaEncoderTextAttention.forward` passes its own `is_causal=self.is_causal` next to
`**kwargs`. Both values come from the same flag, so dropping the injected one changes nothing but
the crash. tests/test_diffusion_model.py fails as soon as transformers no longer needs this.
"""

from __future__ import annotations

from typing import Any

__all__ = ["needs_is_causal_fix", "patch_model"]


def needs_is_causal_fix(model: Any) -> bool:
    text = model.config.get_text_config()
    return getattr(text, "use_bidirectional_attention", None) == "all"


def _drop_injected_is_causal(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    kwargs.pop("is_causal", None)
    return args, kwargs


def patch_model(model: Any) -> int:
    """Apply the workarounds `model` needs; returns how many modules were patched."""
    if not needs_is_causal_fix(model):
        return 0
    patched = 0
    for module in model.modules():
        if type(module).__name__ == "DiffusionGemmaEncoderTextAttention":
            module.register_forward_pre_hook(_drop_injected_is_causal, with_kwargs=True)
            patched += 1
    return patched
