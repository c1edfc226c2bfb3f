"""The Anthropic Messages request (`POST /v1/messages`, `/v1/messages/count_tokens`), as pydantic
models: what `route serve` accepts.

Strict (no coercion: `5` is not a text, `"1"` is not a max_tokens), in the same style as the
chat-completions schema: every field the translation reads is checked for its type here, so a
malformed body is a 400 naming the field, never an error deep in the translation. Keys the API
keeps adding (metadata, betas, citations...) are allowed and ignored; provider extensions on
blocks (`cache_control`) are kept with the block. A block of a type this router cannot pass on
(a document, a server tool's result) validates as `OtherBlock` and is refused by the
translation with its name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

__all__ = ["COUNT_TOKENS_REQUEST", "MESSAGES_REQUEST", "CountTokensRequest", "MessagesRequest"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class CacheControl(_Open):
    type: str


class _Block(_Open):
    cache_control: CacheControl | None = None


class TextBlock(_Block):
    type: Literal["text"]
    text: str


class Base64Source(_Open):
    type: Literal["base64"]
    media_type: str
    data: str


class UrlSource(_Open):
    type: Literal["url"]
    url: str = Field(min_length=1)


class FileSource(_Open):
    type: Literal["file"]
    file_id: str


ImageSource = Annotated[Base64Source | UrlSource | FileSource, Field(discriminator="type")]


class ImageBlock(_Block):
    type: Literal["image"]
    source: ImageSource


class ToolUseBlock(_Block):
    type: Literal["tool_use"]
    id: str
    name: str = Field(min_length=1)
    input: dict[str, Any]


ResultPart = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[ResultPart] | None = None
    is_error: bool | None = None


class ThinkingBlock(_Block):
    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Block):
    type: Literal["redacted_thinking"]
    data: str


class OtherBlock(_Open):
    """A block type the translation names and refuses (documents, server tools' results...)."""

    type: str


_KNOWN = frozenset({"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"})


def _block_kind(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    if not isinstance(kind, str):
        return None  # no tag: pydantic names the missing `type`
    return kind if kind in _KNOWN else "other"


Block = Annotated[
    Annotated[TextBlock, Tag("text")] | Annotated[ImageBlock, Tag("image")]
    | Annotated[ToolUseBlock, Tag("tool_use")] | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ThinkingBlock, Tag("thinking")] | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")]
    | Annotated[OtherBlock, Tag("other")],
    Discriminator(_block_kind),
]


class InputMessage(_Open):
    # Claude Code sends `system` turns inside `messages` too (mid-conversation instructions).
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(_Open):
    name: str = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    type: str | None = None  # absent or "custom" for client tools; server tools name their version
    cache_control: CacheControl | None = None


class _ToolChoiceAuto(_Open):
    type: Literal["auto"]
    disable_parallel_tool_use: bool | None = None


class _ToolChoiceAny(_Open):
    type: Literal["any"]
    disable_parallel_tool_use: bool | None = None


class _ToolChoiceTool(_Open):
    type: Literal["tool"]
    name: str = Field(min_length=1)
    disable_parallel_tool_use: bool | None = None


class _ToolChoiceNone(_Open):
    type: Literal["none"]


ToolChoice = Annotated[_ToolChoiceAuto | _ToolChoiceAny | _ToolChoiceTool | _ToolChoiceNone,
                       Field(discriminator="type")]


class _Thinking(_Open):
    """enabled (with a budget), disabled, adaptive (the model decides; Claude Code's default),
    and whatever Anthropic adds next: the type is passed on, not second-guessed."""

    type: str = Field(min_length=1)
    budget_tokens: int | None = Field(None, ge=1)


class _OutputConfig(_Open):
    effort: str | None = None
    format: dict[str, Any] | None = None


class _Metadata(_Open):
    user_id: str | None = None


class CountTokensRequest(BaseModel):
    # Agents send fields this API grows every month (betas, container, mcp_servers...): ignored.
    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(min_length=1)
    messages: Annotated[list[InputMessage], Field(min_length=1)]
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    stop_sequences: list[str] | None = None
    tool_choice: ToolChoice | None = None
    thinking: _Thinking | None = None
    output_config: _OutputConfig | None = None
    metadata: _Metadata | None = None
    service_tier: str | None = None


MESSAGES_REQUEST = TypeAdapter(MessagesRequest)
COUNT_TOKENS_REQUEST = TypeAdapter(CountTokensRequest)
