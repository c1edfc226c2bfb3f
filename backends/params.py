"""The `params:` and `options:` each backend kind accepts, checked when the config loads.

`params` are generation parameters sent with every request; `options` configure the backend
itself. Both refuse unknown keys, so a typo fails at load with file and line. Provider-specific
parameters that no schema here can know (vLLM's diffusion settings, a litellm provider's
arguments) go in the backend's `passthrough:` section, which is sent verbatim on purpose.

Kept apart from the backend modules so that validating a config imports no HTTP client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AnthropicParams", "ChatParams", "DiffusionLocalOptions", "DiffusionLocalParams", "NoOptions", "Strict"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def values(self) -> dict[str, Any]:
        """The keys the config set, as plain values (unset ones are not sent)."""
        return self.model_dump(exclude_none=True)


class NoOptions(Strict):
    """A kind with nothing to configure."""


class ChatParams(Strict):
    """OpenAI chat-completions parameters (litellm accepts the same names for every provider)."""

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    response_format: dict[str, Any] | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    user: str | None = None
    diffusing: bool | None = Field(None, description="Mercury: stream every intermediate draft")


class DiffusionLocalParams(Strict):
    """Generation settings of the in-process DiffusionGemma engine (transformers' names)."""

    max_new_tokens: int | None = Field(None, ge=1)
    max_denoising_steps: int | None = Field(None, ge=1)
    t_max: float | None = Field(None, gt=0)
    t_min: float | None = Field(None, gt=0)
    entropy_bound: float | None = Field(None, gt=0)
    stability_threshold: int | None = Field(None, ge=1)
    confidence_threshold: float | None = Field(None, gt=0)
    seed: int | None = None
    thinking: bool | None = None  # the chat template's `enable_thinking`; None: the template's default


class DiffusionLocalOptions(Strict):
    """Where the in-process engine runs: device auto|cpu|cuda|cuda:N|mps."""

    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # Concurrent requests generated together (vLLM's --max-num-seqs; its DiffusionGemma recipe uses 4).
    max_batch: int = Field(4, ge=1)
    # How long a batch with room waits for requests sent at the same moment, in milliseconds.
    batch_window_ms: float = Field(5.0, ge=0)


class AnthropicParams(Strict):
    """Anthropic Messages API parameters (its names: `stop_sequences`, `top_k`)."""

    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    stop_sequences: list[str] | None = None
