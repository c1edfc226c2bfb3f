"""Images for the in-process engine: OpenAI `image_url` parts carrying inline PNG or JPEG (`data:`
URLs; nothing is fetched), preprocessed by the checkpoint's own Gemma 4 image processor and placed
where the chat template puts each image.

Why the image processor alone, not the checkpoint's whole processor (`AutoProcessor`, which gives
Gemma4Processor): Gemma4Processor also builds Gemma 4's video processor, which needs torchvision,
and PyPI's torchvision fails to import beside the pinned torch 2.13. transformers ships the image
half in Pillow and numpy (`Gemma4ImageProcessorPil`, `AutoImageProcessor(backend="pil")`), read
from the same processor_config.json. What Gemma4Processor adds for images is two steps, done in
`expand`: each image token the template writes becomes `<boi>`, one image token per soft token,
`<eoi>`; and `mm_token_type_ids` marks the image tokens (image tokens attend both ways).

Pillow, torch and transformers are imported inside functions: importing this module is free.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from backends.errors import UsageError
from backends.types import content_text

__all__ = ["ImageInputs", "checkpoint_file", "checkpoint_has_vision", "decode_image", "expand", "load_image_processor",
           "request_images", "template_content"]

log = logging.getLogger(__name__)

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(;[^;,]*)*?);base64,(?P<data>.*)", re.S)
_MIME_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/jpg": "JPEG"}
_INLINE_HINT = "send the image inline as a base64 data: URL (data:image/png;base64,... or data:image/jpeg;base64,...)"


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("image_url", "input_image", "image")


def template_content(content: Any) -> Any:
    """A message's content for the chat template: plain text, or, when it holds images, Gemma's
    content parts (`{"type": "text", "text": ...}`, `{"type": "image"}`) in their order, so the
    checkpoint's own template decides where each image token goes."""
    if not isinstance(content, list) or not any(_is_image(p) for p in content):
        return content_text(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        if _is_image(part):
            parts.append({"type": "image"})
        elif isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": "text", "text": str(part.get("text") or "")})
    return parts


def request_images(messages: list[dict[str, Any]]) -> list[str]:
    """The URL of every image part, in the order `template_content` places them."""
    urls = []
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            if not _is_image(part):
                continue
            if part.get("type") != "image_url":
                raise UsageError(f"image parts of type {part.get('type')!r} are not understood here; send "
                                 "{'type': 'image_url', 'image_url': {'url': 'data:image/png;base64,...'}}")
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            urls.append(str(url or ""))
    return urls


def decode_image(url: str) -> Any:
    """A Pillow RGB image from a `data:image/png|jpeg;base64,...` URL; UsageError for anything else
    (http URLs included: the in-process engine makes no network requests)."""
    from PIL import Image, UnidentifiedImageError

    if url.lower().startswith(("http://", "https://")):
        raise UsageError(f"the in-process DiffusionGemma engine does not fetch image URLs ({url[:80]}): it makes no "
                         f"network requests; {_INLINE_HINT}")
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        raise UsageError(f"image_url {url[:40]!r}... is not a base64 data: URL; {_INLINE_HINT}")
    mime = (match.group("mime") or "").lower()
    if mime not in _MIME_FORMATS:
        raise UsageError(f"images must be PNG or JPEG, got {mime or 'no media type'} in the data: URL; {_INLINE_HINT}")
    try:
        raw = base64.b64decode(match.group("data"), validate=False)
        with Image.open(io.BytesIO(raw)) as opened:
            if opened.format not in ("PNG", "JPEG"):
                raise UsageError(f"the data: URL says {mime} but holds {opened.format or 'an unknown format'}; "
                                 "send PNG or JPEG")
            return opened.convert("RGB")  # loads the pixels; Pillow's decompression-bomb limit applies here
    except (binascii.Error, ValueError):
        raise UsageError(f"the image's base64 data does not decode; {_INLINE_HINT}") from None
    except UnidentifiedImageError:
        raise UsageError(f"the image data is not a readable {mime} file; {_INLINE_HINT}") from None
    except Image.DecompressionBombError as exc:
        raise UsageError(f"the image is too large to decode safely: {exc}") from None


def checkpoint_file(model_ref: str, name: str) -> Path | None:
    """`name` inside the checkpoint directory, or in the local hub cache for a hub id; None if absent."""
    path = Path(model_ref).expanduser()
    if path.is_dir():
        found = path / name
        return found if found.is_file() else None
    hub_id = model_ref.count("/") == 1 and not model_ref.startswith((".", "/", "~")) and not path.exists()
    if not hub_id or find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model_ref, name)
    except ValueError:  # not a valid repo id after all
        return None
    return Path(cached) if isinstance(cached, str) else None


def _read_json(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def checkpoint_has_vision(model_ref: str) -> bool:
    """True when the checkpoint has a vision tower (`vision_config` in config.json) and an image
    processor config (processor_config.json's `image_processor`, or preprocessor_config.json), and
    Pillow is installed. Reads JSON only: cheap enough to answer before the weights load."""
    if find_spec("PIL") is None:
        return False
    if not _read_json(checkpoint_file(model_ref, "config.json")).get("vision_config"):
        return False
    if "image_processor" in _read_json(checkpoint_file(model_ref, "processor_config.json")):
        return True
    return checkpoint_file(model_ref, "preprocessor_config.json") is not None


def load_image_processor(transformers: Any, where: Path | str, config: Any) -> Any | None:
    """The checkpoint's image processor in its Pillow implementation, or None (no vision tower, no
    processor config, Pillow missing), with a warning saying why images stay off when it should exist."""
    if getattr(config, "vision_config", None) is None:
        return None
    if find_spec("PIL") is None:
        log.warning("diffusion-local: the checkpoint has a vision tower but Pillow is not installed, so images are "
                    "off; pip install 'latency-router[local]' (pillow>=10) to take them")
        return None
    try:
        return transformers.AutoImageProcessor.from_pretrained(where, backend="pil", local_files_only=True)
    except (OSError, ValueError) as exc:
        # A checkpoint without processor files is text-only here; anything else is worth a line.
        if "preprocessor_config.json" not in str(exc) and "processor_config.json" not in str(exc):
            log.warning("diffusion-local: cannot load the checkpoint's image processor, so images are off: %s", exc)
        return None


@dataclass
class ImageInputs:
    """What `generate()` needs beyond the prompt for one request's images."""

    pixel_values: Any  # (images, max_patches, patch_pixels), float32
    image_position_ids: Any  # (images, max_patches, 2); padding patches are (-1, -1)
    mm_token_type_ids: Any  # (1, prompt_len): 1 at image tokens, 0 elsewhere


def expand(input_ids: Any, images: list[Any], processor: Any, config: Any) -> tuple[Any, ImageInputs]:
    """(input_ids with each image token expanded to `<boi>`, N image tokens, `<eoi>`, and the image
    inputs), N being the soft tokens the processor gives that image, as Gemma4Processor does."""
    import torch

    image_id, boi, eoi = int(config.image_token_id), int(config.boi_token_id), int(config.eoi_token_id)
    ids = input_ids[0].tolist()
    places = [i for i, t in enumerate(ids) if t == image_id]
    if len(places) != len(images):
        raise UsageError(f"the prompt holds {len(places)} image placeholder tokens for {len(images)} images: either "
                         "the text contains the image token itself (remove it) or the checkpoint's chat template "
                         "does not place images")
    processed = processor(images=images, return_tensors="pt")
    counts = [int(n) for n in processed["num_soft_tokens_per_image"]]
    out: list[int] = []
    start = 0
    for place, count in zip(places, counts):
        out += ids[start:place] + [boi] + [image_id] * count + [eoi]
        start = place + 1
    out += ids[start:]
    expanded = torch.tensor([out], dtype=input_ids.dtype)
    return expanded, ImageInputs(pixel_values=processed["pixel_values"],
                                 image_position_ids=processed["image_position_ids"],
                                 mm_token_type_ids=(expanded == image_id).long())
