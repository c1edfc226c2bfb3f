"""Load a DiffusionGemma checkpoint for the in-process engine, with a clear message for every
missing piece: torch not installed, no weights at the path, not a DiffusionGemma checkpoint,
out of memory.

Nothing is downloaded: a hub id is read from the local cache only (`local_files_only=True`).
torch and transformers are imported inside functions, so importing this module is free.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.diffusion.compat import patch_model
from backends.errors import BackendError

__all__ = [
    "ALTERNATIVES",
    "EngineSetupError",
    "LoadedModel",
    "choose_device",
    "import_engine",
    "load_model",
    "missing_dependency_message",
    "oom_message",
    "read_config",
    "read_config_json",
]

log = logging.getLogger(__name__)

ALTERNATIVES = (
    "DiffusionGemma is also served over HTTP by vLLM, mlx-vlm and NVIDIA NIM; point an `openai` backend "
    "at such a server (kind: openai, base_url: http://127.0.0.1:8000/v1) to use it without the local engine."
)
_GET_WEIGHTS = (
    "Download them first (e.g. `hf download google/diffusiongemma-26B-A4B-it --local-dir PATH`) and set "
    "the backend's `model:` to that directory, or to the hub id once it is in the local Hugging Face cache"
)
_DTYPES = ("float32", "bfloat16", "float16")


class EngineSetupError(BackendError):
    """The local engine cannot run here (missing package, weights, memory). Never retried; the
    router falls back to the next backend, and the CLI exits 2 with this message."""

    retryable = False
    exit_code = 2


def missing_dependency_message(missing: str) -> str:
    return (
        f"the diffusion-local backend needs {missing}, which is not installed. Install the CPU build of torch "
        "first, then the extra: `pip install torch==2.13.0` (where the CPU wheel is on disk; a bare `torch` "
        "requirement pulls a CUDA build of several GB, which is what you want only on a GPU machine), then "
        f"`pip install 'latency-router[local]'` (torch and transformers>=5.23). {ALTERNATIVES}"
    )


def oom_message(what: str, device: str, dtype: str) -> str:
    return (
        f"out of memory while {what} on {device} ({dtype}). DiffusionGemma 26B needs about 52 GB in bfloat16; "
        "a 24 GB GPU needs a 4-bit quantization. Try a smaller `max_new_tokens`, `options: {dtype: bfloat16}`, "
        f"another device (`options: {{device: cuda:1}}`), or a quantized checkpoint. {ALTERNATIVES}"
    )


def import_engine() -> tuple[Any, Any]:
    """(torch, transformers), or EngineSetupError naming the pip command when either is absent."""
    try:
        import torch
    except ImportError:
        raise EngineSetupError(missing_dependency_message("torch")) from None
    try:
        import transformers
        from transformers import DiffusionGemmaForBlockDiffusion  # noqa: F401  (5.23 or later)
    except ImportError:
        raise EngineSetupError(missing_dependency_message("transformers>=5.23")) from None
    return torch, transformers


def choose_device(torch: Any, options: dict[str, Any]) -> tuple[str, Any]:
    """(device, dtype) from `options` (device: auto|cpu|cuda|cuda:N|mps; dtype: auto|float32|bfloat16|float16).

    auto picks the GPU when there is one, in bfloat16 (float16 on Apple); on CPU it warns that
    generation will be slow and uses float32, the one dtype every CPU kernel supports.
    """
    device = str(options.get("device", "auto"))
    if device == "auto":
        if torch.cuda.is_available():
            device = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
            log.warning("diffusion-local: no GPU found, running DiffusionGemma on the CPU; a real checkpoint "
                        "will take minutes per answer there (a GPU takes well under a second per canvas)")
    elif device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineSetupError(f"options.device is {device!r} but torch sees no CUDA GPU (torch {torch.__version__}); "
                               "use device: cpu, or install a CUDA build of torch")
    dtype_name = str(options.get("dtype", "auto"))
    if dtype_name == "auto":
        dtype_name = {"cuda": "bfloat16", "mps": "float16"}.get(device.split(":")[0], "float32")
    if dtype_name not in _DTYPES:
        raise EngineSetupError(f"options.dtype is {dtype_name!r}; use one of auto, {', '.join(_DTYPES)}")
    return device, getattr(torch, dtype_name)


def _where(model_ref: str) -> Path | str:
    """A directory when `model_ref` names one; otherwise a hub id to look up in the local cache."""
    path = Path(model_ref).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EngineSetupError(f"{model_ref} is a file; give the checkpoint directory (the one holding "
                                   f"config.json and *.safetensors). {ALTERNATIVES}")
        return path
    if model_ref.count("/") == 1 and not model_ref.startswith((".", "/", "~")):
        return model_ref
    raise EngineSetupError(f"no DiffusionGemma weights at {model_ref}: the directory does not exist. "
                           f"{_GET_WEIGHTS}. {ALTERNATIVES}")


def read_config(model_ref: str) -> Any:
    """The checkpoint's config, checked to be DiffusionGemma. Reads config.json only (no weights)."""
    _torch, transformers = import_engine()
    where = _where(model_ref)
    try:
        config = transformers.AutoConfig.from_pretrained(where, local_files_only=True)
    except (OSError, ValueError) as exc:
        if isinstance(where, str):
            raise EngineSetupError(f"{model_ref} is not in the local Hugging Face cache and nothing is downloaded "
                                   f"at run time. {_GET_WEIGHTS}. {ALTERNATIVES}") from None
        raise EngineSetupError(f"no DiffusionGemma checkpoint at {model_ref}: {exc}. {_GET_WEIGHTS}. "
                               f"{ALTERNATIVES}") from None
    model_type = getattr(config, "model_type", None)
    if model_type != "diffusion_gemma":
        raise EngineSetupError(_not_diffusion_gemma(model_ref, model_type))
    return config


def read_config_json(model_ref: str) -> tuple[Path, dict[str, Any]]:
    """The checkpoint's directory and its config.json as JSON, checked to be DiffusionGemma, with
    the same errors as `read_config` but without torch or transformers (`route engine info`)."""
    import json

    from backends.diffusion.vision import checkpoint_file

    where = _where(model_ref)
    found = checkpoint_file(model_ref, "config.json")
    if found is None:
        if isinstance(where, str):
            raise EngineSetupError(f"{model_ref} is not in the local Hugging Face cache and nothing is downloaded "
                                   f"at run time. {_GET_WEIGHTS}. {ALTERNATIVES}")
        raise EngineSetupError(f"no DiffusionGemma checkpoint at {model_ref}: it has no config.json. {_GET_WEIGHTS}. "
                               f"{ALTERNATIVES}")
    try:
        config = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineSetupError(f"{found} is not a readable JSON config ({exc}). {_GET_WEIGHTS}.") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "diffusion_gemma":
        raise EngineSetupError(_not_diffusion_gemma(model_ref, model_type))
    return found.parent, config


def _not_diffusion_gemma(model_ref: str, model_type: Any) -> str:
    return (f"{model_ref} is a {model_type!r} checkpoint, not DiffusionGemma (model_type 'diffusion_gemma'); the "
            "diffusion-local backend runs only DiffusionGemmaForBlockDiffusion. Serve other models with an "
            f"`openai` or `litellm` backend. {ALTERNATIVES}")


@dataclass
class LoadedModel:
    """A model and tokenizer ready to generate, and where they live; `image_processor` when the
    checkpoint takes images (a vision tower and an image processor config), else None."""

    model: Any
    tokenizer: Any
    device: str
    dtype: str
    canvas_length: int
    image_processor: Any = None


def load_model(model_ref: str, options: dict[str, Any] | None = None) -> LoadedModel:
    """Load weights, tokenizer and (when there is one) image processor from a directory or the local
    hub cache onto the chosen device."""
    from backends.diffusion.vision import load_image_processor

    torch, transformers = import_engine()
    options = dict(options or {})
    config = read_config(model_ref)
    where = _where(model_ref)
    device, dtype = choose_device(torch, options)
    dtype_name = str(dtype).removeprefix("torch.")
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(where, local_files_only=True)
        model = transformers.DiffusionGemmaForBlockDiffusion.from_pretrained(
            where, local_files_only=True, dtype=dtype, **_placement(device)
        )
        if device != "cpu" and str(model.device) == "cpu":
            model = model.to(device)
    except torch.OutOfMemoryError:
        raise EngineSetupError(oom_message("loading the weights", device, dtype_name)) from None
    except (OSError, ValueError) as exc:
        raise EngineSetupError(f"cannot load the DiffusionGemma weights or tokenizer from {model_ref}: {exc}. "
                               f"{_GET_WEIGHTS}. {ALTERNATIVES}") from None
    if getattr(tokenizer, "chat_template", None) is None:
        raise EngineSetupError(f"the tokenizer at {model_ref} has no chat template, so chat messages cannot be "
                               "formatted; use an instruction-tuned (-it) DiffusionGemma checkpoint")
    model.eval()
    patch_model(model)  # transformers 5.24 crashes on use_bidirectional_attention "all" (see compat)
    _warm_imports()
    return LoadedModel(model, tokenizer, device, dtype_name, int(config.canvas_length),
                       image_processor=load_image_processor(transformers, where, config))


def _placement(device: str) -> dict[str, Any]:
    # With accelerate, weights stream straight onto the device; without it transformers refuses
    # `device_map`, so the model is built in host memory and moved afterwards.
    from importlib.util import find_spec

    return {"device_map": device} if device != "cpu" and find_spec("accelerate") is not None else {}


def _warm_imports() -> None:
    # Every denoising step calls torch.compiler.cudagraph_mark_step_begin(), whose first call
    # imports torch._inductor (one to ten seconds). Pay it at load time, not in the first answer.
    try:
        import torch._inductor.cudagraph_trees  # noqa: F401
    except ImportError:  # pragma: no cover - a torch build without inductor
        pass
