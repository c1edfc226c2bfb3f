"""The OpenAI chat-completions request, as pydantic models: what `route serve` accepts.

Validated strictly (no coercion: `"0.5"` is not a temperature, `true` is not a max_tokens)
before anything is routed, so nothing malformed reaches the scorer, the log or an upstream:

- messages by role (system, developer, user, assistant, tool, and the deprecated function),
  each role with the content it may carry (text, or a list of typed parts: text, image_url,
  input_audio, file; refusal for the assistant);
- tools, tool_choice and response_format in the API's shapes; numeric options in the API's
  ranges;
- the decoded body no deeper than validation.MAX_DEPTH (checked before this schema sees it).

Unknown keys: where the API takes free-form JSON (a tool's `parameters`, a JSON schema,
`metadata`, `logit_bias`) anything goes; messages and content parts keep extra keys, because
providers extend them (`cache_control`, `reasoning_content`) and they are sent on verbatim;
the typed objects (tools, tool_choice, response_format, stream_options) check their known keys
and keep the rest (real clients add some: an older Codex wrote a tool's `name` beside its
`function`); unknown top-level fields are sent on, and each backend kind takes what it can.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = ["CHAT_REQUEST", "ChatCompletionRequest"]

_NAME = r"^[a-zA-Z0-9_-]{1,64}$"  # the API's function-name rule


class _Strict(BaseModel):
    """A typed object: its known keys are checked; keys a client adds are kept and logged."""

    model_config = ConfigDict(extra="allow", strict=True)


class _Open(BaseModel):
    """A message or content part: provider extensions are kept and sent on."""

    model_config = ConfigDict(extra="allow", strict=True)


# -- content parts ----------------------------------------------------------------------------


class TextPart(_Open):
    type: Literal["text"]
    text: str


class ImageUrl(_Open):
    url: str = Field(min_length=1)
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Open):
    type: Literal["image_url"]
    image_url: ImageUrl


class InputAudio(_Open):
    data: str
    format: Literal["wav", "mp3"]


class AudioPart(_Open):
    type: Literal["input_audio"]
    input_audio: InputAudio


class FileRef(_Open):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Open):
    type: Literal["file"]
    file: FileRef


class RefusalPart(_Open):
    type: Literal["refusal"]
    refusal: str


UserPart = Annotated[TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")]
AssistantPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]
TextParts = Annotated[list[TextPart], Field(min_length=1)]


# -- messages ---------------------------------------------------------------------------------


class FunctionCall(_Open):
    name: str
    arguments: str


class ToolCall(_Open):
    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(_Open):
    role: Literal["system"]
    content: str | TextParts
    name: str | None = None


class DeveloperMessage(_Open):
    role: Literal["developer"]
    content: str | TextParts
    name: str | None = None


class UserMessage(_Open):
    role: Literal["user"]
    content: str | Annotated[list[UserPart], Field(min_length=1)]
    name: str | None = None


class AssistantMessage(_Open):
    role: Literal["assistant"]
    content: str | Annotated[list[AssistantPart], Field(min_length=1)] | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    function_call: FunctionCall | None = None
    name: str | None = None


class ToolMessage(_Open):
    role: Literal["tool"]
    content: str | TextParts
    tool_call_id: str


class FunctionMessage(_Open):
    role: Literal["function"]
    content: str | None
    name: str


Message = Annotated[SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage | FunctionMessage,
                    Field(discriminator="role")]


# -- tools and formats ------------------------------------------------------------------------


class FunctionDef(_Strict):
    name: str = Field(pattern=_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON schema: free-form
    strict: bool | None = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class _FunctionName(_Strict):
    name: str = Field(pattern=_NAME)


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: _FunctionName


class JsonSchema(_Strict):
    name: str = Field(pattern=_NAME)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class TextFormat(_Strict):
    type: Literal["text"]


class JsonObjectFormat(_Strict):
    type: Literal["json_object"]


class JsonSchemaFormat(_Strict):
    type: Literal["json_schema"]
    json_schema: JsonSchema


ResponseFormat = Annotated[TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")]


class StreamOptions(_Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


# -- the request ------------------------------------------------------------------------------

Penalty = Annotated[float, Field(ge=-2, le=2)]


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions. `model` defaults to `auto` (route's own extension)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field("auto", min_length=1)
    messages: Annotated[list[Message], Field(min_length=1)]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(None, ge=1, le=128)
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    logit_bias: dict[str, Annotated[int, Field(ge=-100, le=100)]] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    seed: int | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    reasoning_effort: str | None = None  # the set grows with each model generation ("none", "xhigh")
    service_tier: str | None = None


CHAT_REQUEST = TypeAdapter(ChatCompletionRequest)
