"""Which model names an OpenAI-compatible server serves, and a did-you-mean when ours is not one.

vLLM serves exactly the name it was started with and answers any other with 404, so a model id
that differs only in case (DiffusionGemma is published as `...-26B-A4B-it`) fails against it.
llama.cpp's llama-server lists the path of the .gguf file it loaded (`/models/qwen3-8b.gguf`,
`owned_by: llamacpp`) and, holding one model, answers whatever name a request gives; in its
router mode (several models) a request names one by that id, its file name or its stem.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["not_served_hint", "served_models", "serves"]


def served_models(body: Any) -> list[str]:
    """The ids in a GET /v1/models body (an empty list when it is not one)."""
    try:
        data = body.get("data", [])
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]
    except (AttributeError, TypeError):
        return []


def serves(model: str, body: Any) -> bool:
    """Whether a server whose GET /v1/models answered `body` answers requests for `model`
    (True when the body lists nothing: there is nothing to judge by)."""
    served = served_models(body)
    if not served or model in served:
        return True
    entries = [m for m in body.get("data", []) if isinstance(m, dict) and m.get("id")]
    if not _is_llama_cpp(entries):
        return False
    if len(served) == 1:
        return True  # one model loaded: llama-server answers any name with it
    return any(model in _file_names(s) for s in served)


def _is_llama_cpp(entries: list[dict[str, Any]]) -> bool:
    # vLLM also serves a .gguf by its path, and then only by that exact name
    owners = {str(m.get("owned_by") or "") for m in entries}
    return owners == {"llamacpp"} or ("vllm" not in owners
                                      and all(str(m["id"]).lower().endswith(".gguf") for m in entries))


def _file_names(path: str) -> tuple[str, str]:
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return name, name[:-5] if name.lower().endswith(".gguf") else name


def not_served_hint(model: str, served: list[str]) -> str:
    """Which names a server does serve, led by a case-insensitive (then fuzzy) did-you-mean."""
    same = [s for s in served if s.casefold() == model.casefold()]
    close = same or difflib.get_close_matches(model, served, n=1, cutoff=0.6)
    listed = ", ".join(served[:10]) + (f" and {len(served) - 10} more" if len(served) > 10 else "")
    mean = f"did you mean {close[0]!r}? (set the backend's `model:` to it) " if close else ""
    return f"{mean}it serves: {listed}"
