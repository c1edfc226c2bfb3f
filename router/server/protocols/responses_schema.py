"""The OpenAI Responses request (`POST /v1/responses`), as pydantic models: what `route serve`
accepts. Strict about the types of every field the translation reads (a malformed body is a
400 naming the field), lenient about keys the API keeps adding (ignored). Items and content
parts of a type the translation cannot pass on validate as "other" and are refused by it, by
name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

__all__ = ["RESPONSES_REQUEST", "ResponsesRequest"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _TextPart(_Open):
    type: Literal["input_text", "output_text", "text"]
    text: str


class _RefusalPart(_Open):
    type: Literal["refusal"]
    refusal: str


class _ImagePart(_Open):
    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: str | None = None


class _OtherPart(_Open):
    type: str


def _tagged(known: frozenset[str], default: str | None = None):
    def kind(value: Any) -> str | None:
        tag = value.get("type", default) if isinstance(value, dict) else getattr(value, "type", default)
        if not isinstance(tag, str):
            return None
        return tag if tag in known else "other"
    return kind


Part = Annotated[
    Annotated[_TextPart, Tag("input_text")] | Annotated[_TextPart, Tag("output_text")] | Annotated[_TextPart, Tag("text")]
    | Annotated[_RefusalPart, Tag("refusal")] | Annotated[_ImagePart, Tag("input_image")]
    | Annotated[_OtherPart, Tag("other")],
    Discriminator(_tagged(frozenset({"input_text", "output_text", "text", "refusal", "input_image"}))),
]


class _MessageItem(_Open):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[Part]


class _FunctionCallItem(_Open):
    type: Literal["function_call"]
    call_id: str
    name: str = Field(min_length=1)
    arguments: str


class _FunctionCallOutputItem(_Open):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[Part]


class _ReasoningItem(_Open):
    type: Literal["reasoning"]


class _OtherItem(_Open):
    type: str


Item = Annotated[
    Annotated[_MessageItem, Tag("message")] | Annotated[_FunctionCallItem, Tag("function_call")]
    | Annotated[_FunctionCallOutputItem, Tag("function_call_output")] | Annotated[_ReasoningItem, Tag("reasoning")]
    | Annotated[_OtherItem, Tag("other")],
    # An item without `type` is a message ({"role", "content"}), as the API reads it.
    Discriminator(_tagged(frozenset({"message", "function_call", "function_call_output", "reasoning"}), "message")),
]


class _FunctionTool(_Open):
    type: Literal["function"]
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class _NamespaceTool(_Open):
    type: Literal["namespace"]
    name: str | None = None
    tools: list[_FunctionTool | _OtherPart] = Field(default_factory=list)


Tool = Annotated[
    Annotated[_FunctionTool, Tag("function")] | Annotated[_NamespaceTool, Tag("namespace")]
    | Annotated[_OtherPart, Tag("other")],
    Discriminator(_tagged(frozenset({"function", "namespace"}))),
]


class _NamedFunction(_Open):
    type: Literal["function"]
    name: str = Field(min_length=1)


class _JsonSchemaFormat(_Open):
    type: Literal["json_schema"]
    name: str | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None
    description: str | None = None


class _PlainFormat(_Open):
    type: Literal["text", "json_object"]


class _Text(_Open):
    format: Annotated[_JsonSchemaFormat | _PlainFormat, Field(discriminator="type")] | None = None
    verbosity: str | None = None


class _Reasoning(_Open):
    effort: str | None = None
    summary: str | None = None


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(min_length=1)
    input: str | list[Item]
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["auto", "none", "required"] | _NamedFunction | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    stream: bool = False
    background: bool | None = None
    text: _Text | None = None
    reasoning: _Reasoning | None = None
    previous_response_id: str | None = None
    conversation: Any = None
    prompt: Any = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    seed: int | None = None
    include: list[str] | None = None


RESPONSES_REQUEST = TypeAdapter(ResponsesRequest)
