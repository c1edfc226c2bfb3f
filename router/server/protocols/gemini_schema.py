"""Gemini's GenerateContentRequest (`POST /v1beta/models/{model}:generateContent`), as pydantic
models: what `route serve` accepts.

Strict, in the style of the other protocols' schemas: every field the translation reads is
checked for its type here, so a malformed body is a 400 naming the field (`contents[0].parts[1]`),
never an error deep in the translation. Fields are read in camelCase or snake_case, as Google's
API reads them (Gemini CLI sends the one, the google-genai SDK some of the other). Keys the API keeps adding (safety settings, media
resolution, labels...) are allowed and left out; a part or tool of a kind this router cannot pass
on (server-side code execution, Google Search) validates and is refused by the translation with
its name.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

__all__ = ["GENERATE_REQUEST", "Content", "FunctionCall", "FunctionDeclaration", "FunctionResponse",
           "GenerateContentRequest", "GenerationConfig", "Part", "ThinkingConfig"]


# Google's JSON takes each field in camelCase (what Gemini CLI sends) or as the proto names it
# (snake_case: what the google-genai SDK sends inside `thinkingConfig`): both are read.
_NAMES = ConfigDict(alias_generator=to_camel, populate_by_name=True, strict=True)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", **_NAMES)


class Blob(_Open):
    mime_type: str = Field(min_length=1)
    data: str


class FileData(_Open):
    file_uri: str = Field(min_length=1)
    mime_type: str | None = None


class FunctionCall(_Open):
    name: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    id: str | None = None


class FunctionResponse(_Open):
    name: str = Field(min_length=1)
    response: dict[str, Any] | None = None
    id: str | None = None


class Part(_Open):
    """One part: text (a thought when `thought` is true), inline data, a file, a function call
    or its response. `thoughtSignature` is Google's seal on the model's thinking: kept by the
    schema, not sent to other providers (they cannot read it)."""

    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    inline_data: Blob | None = None
    file_data: FileData | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None


class Content(_Open):
    # "function" is the older API's role of a turn of function responses; absent means user
    role: Literal["user", "model", "function"] | None = None
    parts: list[Part] = Field(default_factory=list)


class FunctionDeclaration(_Open):
    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    parameters: dict[str, Any] | None = None  # Google's OpenAPI subset (`type: "OBJECT"`)
    parameters_json_schema: Any = None  # JSON Schema as it is (Gemini CLI sends this)


class Tool(_Open):
    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(_Open):
    mode: Literal["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"] | None = None
    allowed_function_names: list[str] | None = None


class ToolConfig(_Open):
    function_calling_config: FunctionCallingConfig | None = None


class ThinkingConfig(_Open):
    include_thoughts: bool | None = None
    thinking_budget: int | None = Field(None, ge=-1)  # -1: the model decides; 0: no thinking
    thinking_level: str | None = None  # MINIMAL, LOW, MEDIUM, HIGH (Gemini 3)


class GenerationConfig(_Open):
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: float | None = Field(None, ge=0)
    candidate_count: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    stop_sequences: list[str] | None = Field(None, max_length=5)
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: Any = None
    response_modalities: list[str] | None = None
    thinking_config: ThinkingConfig | None = None


class GenerateContentRequest(BaseModel):
    # The API grows fields every release (safetySettings, labels, serviceTier...): ignored.
    model_config = ConfigDict(extra="ignore", **_NAMES)

    contents: Annotated[list[Content], Field(min_length=1)]
    system_instruction: Content | str | None = None
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    generation_config: GenerationConfig | None = None
    cached_content: str | None = None


GENERATE_REQUEST = TypeAdapter(GenerateContentRequest)
