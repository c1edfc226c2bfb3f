"""Gemini's protocol (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent`,
`:countTokens`), as Gemini CLI and the google-genai SDK speak it, translated to and from the
router's chat-format call. The request is checked against gemini_schema.py; answers, stream
events and errors are written by gemini_events.py.

The model and the method are in the path, and a stream's framing in the query (`?alt=sse`), so
each request gets a dialect of its own (`GeminiRoutes.bind`). Translated:

- `systemInstruction` -> a system message; `contents` by role: `user` turns -> user messages
  (each text part kept apart, so a client's context part stays its own: Gemini CLI sends a
  `<session_context>` part before the task), `model` turns -> assistant messages (`thought`
  parts as `reasoning_content`, `functionCall` parts as tool calls), `functionResponse` parts ->
  tool messages matched to their call by `id`, or else by name in order (the API leaves ids
  out); images (`inlineData`, an http(s) `fileData`) -> image parts.
- `tools[].functionDeclarations` -> function tools (`parametersJsonSchema` as it is; Google's
  OpenAPI `parameters` as JSON Schema: lower-case types, `nullable`); `toolConfig`'s mode ->
  `tool_choice` (AUTO, ANY -> required, or the one allowed function; NONE).
- `generationConfig`: `temperature`, `maxOutputTokens`, `stopSequences` -> the router's own;
  `topP`, `topK`, `seed`, `presencePenalty`, `frequencyPenalty` sent on; `responseMimeType:
  application/json` with `responseJsonSchema` or `responseSchema` -> `response_format`;
  `thinkingConfig` (`thinkingBudget`, `thinkingLevel`) -> `reasoning_effort`, and
  `includeThoughts` decides whether the answer's thinking comes back as thought parts.

Accepted and not sent on: `safetySettings`, `labels`, `mediaResolution`, `responseLogprobs`,
`logprobs` (docs/reference/fields.md). Refused with a 400 naming the field: Google's server-side tools (Google Search, code
execution, URL context), parts only Google can read (a Files API `fileData`, executable code),
`cachedContent`, more than one candidate, output other than text. A `thoughtSignature` route
wrote (an answer's signed thinking, gemini_events.py) becomes its turn's `thinking_blocks` again;
Google's own are accepted and not sent on: no other provider reads them. Gemini names no
session: route's own `session` field or `X-Session-Id` names one, else it is derived from the task.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import orjson

from backends.anthropic_format import reasoning_effort
from backends.types import Completion, Message
from router.server.endpoint import Plain
from router.server.errors import ApiError
from router.server.protocols import GEMINI_PREFIXES
from router.server.protocols.base import Call, Facts, bad_request, decode, route_options, session_field, validated
from router.server.protocols.gemini_events import GeminiEvents, error_body, response_body, signed_blocks
from router.server.protocols.gemini_schema import (
    GENERATE_REQUEST,
    Content,
    FunctionCall,
    FunctionDeclaration,
    FunctionResponse,
    GenerateContentRequest,
    GenerationConfig,
    Part,
    ThinkingConfig,
)

__all__ = ["GEMINI_PREFIX", "GEMINI_PREFIXES", "GeminiDialect", "GeminiRoutes", "count_tokens", "gemini_listing"]

GEMINI_PREFIX = GEMINI_PREFIXES[0]  # Gemini CLI's; its models are listed here
_REFERENCE = "https://ai.google.dev/api/generate-content"
_WHAT = "a GenerateContentRequest with `contents`"
_METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_LEVELS = frozenset({"minimal", "low", "medium", "high"})
_SENT_ON = ("top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")  # as chat names them too
_CHOICES = {"ANY": "required", "NONE": "none"}
_WHY = "this router translates Gemini's protocol for backends of every kind"
_NO_CONFIG = GenerationConfig()
_NO_THINKING = ThinkingConfig()


def _unsupported(message: str, param: str) -> ApiError:
    return bad_request(f"`{param}`: {message} ({_WHY})", param, "unsupported_parameter")


# -- the request --------------------------------------------------------------------------------


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # name -> a schema
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "not", "additionalProperties")


def _keyword(key: str, value: Any) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _json_schema(sub) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_json_schema(sub) for sub in value]
    if key in _SCHEMA_ONE:
        return _json_schema(value)
    return value.lower() if key == "type" and isinstance(value, str) else value


def _json_schema(schema: Any) -> Any:
    """Google's OpenAPI subset as JSON Schema: `type: "OBJECT"` -> "object", `nullable: true`
    -> the type or null; `propertyOrdering` (Google's alone) dropped. Walked keyword by keyword,
    so a property that is named `type` or `nullable` stays a property."""
    if not isinstance(schema, dict):
        return schema
    out = {key: _keyword(key, value) for key, value in schema.items() if key not in ("nullable", "propertyOrdering")}
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _system(instruction: Content | str | None) -> list[Message]:
    if instruction is None:
        return []
    text = instruction if isinstance(instruction, str) else "\n".join(
        p.text for p in instruction.parts if p.text is not None and not p.thought)
    return [{"role": "system", "content": text}] if text else []


def _media(part: Part, where: str) -> dict[str, Any]:
    """An image part in chat's shape; a 400 for data only Google can read."""
    if part.inline_data is not None:
        mime = part.inline_data.mime_type
        if not mime.startswith("image/"):
            raise _unsupported(f"inline data of type {mime!r} cannot be passed on; images can", f"{where}.inlineData")
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part.inline_data.data}"}}
    assert part.file_data is not None
    uri = part.file_data.file_uri
    if not uri.startswith(("http://", "https://")) or uri.startswith("https://generativelanguage.googleapis.com"):
        raise _unsupported("a file uploaded to Google's Files API can be read only there; send it inline",
                           f"{where}.fileData")
    return {"type": "image_url", "image_url": {"url": uri}}


def _empty(part: Part, where: str) -> None:
    """A part with nothing this router can pass on: a 400 naming what it holds."""
    kinds = ", ".join(sorted(part.model_extra or {})) or "nothing"
    raise _unsupported(f"a part of {kinds} cannot be passed on (text, images, function calls and their "
                       "responses can)", where)


def _tool_call(call: FunctionCall, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": call.name, "arguments": orjson.dumps(call.args or {}).decode()}}


def _assistant(text: str, thoughts: str, calls: list[dict[str, Any]], sealed: list[dict[str, Any]]) -> Message:
    message: Message = {"role": "assistant", "content": text or None}
    for key, value in (("reasoning_content", thoughts), ("tool_calls", calls), ("thinking_blocks", sealed)):
        if value:
            message[key] = value
    return message


def _user_part(part: Part, where: str) -> dict[str, Any] | None:
    """A user turn's part in chat's shape; None for a thought (the client's, not the task)."""
    if part.text is not None:
        return None if part.thought else {"type": "text", "text": part.text}
    if part.inline_data is not None or part.file_data is not None:
        return _media(part, where)
    _empty(part, where)
    return None


class _Turns:
    """`contents` as chat messages. Function calls get ids where the client sent none, and each
    response is matched to the call it answers: by id, else the earliest unanswered call of the
    same name in the model turn before it."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._unanswered: dict[str, list[str]] = {}

    def add(self, turn: int, content: Content) -> None:
        if content.role == "model":
            self._model(turn, content)
        else:
            self._user(turn, content)

    def _model(self, turn: int, content: Content) -> None:
        self._unanswered = {}
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[dict[str, Any]] = []
        sealed: list[dict[str, Any]] = []
        for k, part in enumerate(content.parts):
            sealed += signed_blocks(part.thought_signature)  # route's own; Google's are not sent on
            if part.function_call is not None:
                calls.append(self._call(part.function_call, f"call_{turn}_{k}"))
            elif part.text is not None:
                (thoughts if part.thought else texts).append(part.text)
            elif part.thought_signature is None:  # a part that is only a signature carries nothing to pass on
                _empty(part, f"contents[{turn}].parts[{k}]")
        self.messages.append(_assistant("".join(texts), "".join(thoughts), calls, sealed))

    def _call(self, call: FunctionCall, fallback_id: str) -> dict[str, Any]:
        call_id = call.id or fallback_id
        self._unanswered.setdefault(call.name, []).append(call_id)
        return _tool_call(call, call_id)

    def _result(self, response: FunctionResponse, fallback_id: str) -> None:
        waiting = self._unanswered.get(response.name) or []
        call_id = response.id or (waiting[0] if waiting else fallback_id)
        if call_id in waiting:
            waiting.remove(call_id)
        # Tool messages go first: each must follow the assistant turn that made its call.
        self.messages.append({"role": "tool", "tool_call_id": call_id,
                              "content": orjson.dumps(response.response or {}).decode()})

    def _user(self, turn: int, content: Content) -> None:
        parts: list[dict[str, Any]] = []
        for k, part in enumerate(content.parts):
            if part.function_response is not None:
                self._result(part.function_response, f"call_{turn}_{k}")
            elif (kept := _user_part(part, f"contents[{turn}].parts[{k}]")) is not None:
                parts.append(kept)
        if len(parts) == 1 and parts[0]["type"] == "text":
            self.messages.append({"role": "user", "content": parts[0]["text"]})
        elif parts:
            self.messages.append({"role": "user", "content": parts})


def _parameters(declaration: FunctionDeclaration) -> Any:
    if declaration.parameters_json_schema is not None:
        return declaration.parameters_json_schema
    if declaration.parameters is not None:
        return _json_schema(declaration.parameters)
    return {"type": "object", "properties": {}}


def _tools(request: GenerateContentRequest) -> list[dict[str, Any]]:
    tools = []
    for i, tool in enumerate(request.tools or ()):
        for name in tool.model_extra or {}:
            raise _unsupported("Google's server-side tools run only at Google; declare functions instead",
                               f"tools[{i}].{name}")
        for declaration in tool.function_declarations or ():
            function: dict[str, Any] = {"name": declaration.name, "parameters": _parameters(declaration)}
            if declaration.description is not None:
                function["description"] = declaration.description
            tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(request: GenerateContentRequest, tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    """The tools offered and chat's `tool_choice` for `toolConfig` (None: the default, auto)."""
    config = request.tool_config.function_calling_config if request.tool_config else None
    if config is None or not tools:
        return tools, None
    if config.mode == "ANY" and config.allowed_function_names:
        # chat cannot say "one of these": offer only those
        tools = [t for t in tools if t["function"]["name"] in config.allowed_function_names]
        if len(tools) == 1:
            return tools, {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return tools, _CHOICES.get(config.mode or "AUTO")


def _effort(thinking: ThinkingConfig) -> str | None:
    """`thinkingConfig` as chat's `reasoning_effort`; None where the model is to decide."""
    if thinking.thinking_level is not None:
        level = thinking.thinking_level.lower()
        if level not in _LEVELS:
            raise bad_request(f"`generationConfig.thinkingConfig.thinkingLevel` must be one of MINIMAL, LOW, "
                              f"MEDIUM, HIGH (got {thinking.thinking_level!r})", "generationConfig.thinkingConfig")
        return level
    budget = thinking.thinking_budget
    if budget is None or budget == -1:
        return None
    return reasoning_effort({"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"})


def _response_format(config: GenerationConfig) -> dict[str, Any] | None:
    if config.response_mime_type in (None, "text/plain"):
        return None
    if config.response_mime_type != "application/json":
        raise _unsupported(f"{config.response_mime_type!r} answers cannot be asked of every backend; "
                           "application/json and text/plain can", "generationConfig.responseMimeType")
    schema = config.response_json_schema
    if schema is None and config.response_schema is not None:
        schema = _json_schema(config.response_schema)
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}


def _refuse_outputs(config: GenerationConfig) -> None:
    if config.candidate_count not in (None, 1):
        raise _unsupported("one candidate per request; send one request per answer", "generationConfig.candidateCount")
    if config.response_modalities and any(m.upper() != "TEXT" for m in config.response_modalities):
        raise _unsupported("text is the only output", "generationConfig.responseModalities")


def _generation(config: GenerationConfig, extra: dict[str, Any]) -> None:
    """What `generationConfig` asks beyond the limit, temperature and stop sequences, in chat's terms."""
    _refuse_outputs(config)
    for name in _SENT_ON:
        value = getattr(config, name)
        if value is not None:
            extra[name] = int(value) if name == "top_k" else value
    found = {"response_format": _response_format(config),
             "reasoning_effort": _effort(config.thinking_config or _NO_THINKING)}
    extra.update({name: value for name, value in found.items() if value is not None})


def _read(raw: bytes) -> tuple[GenerateContentRequest, dict[str, Any], list[Message]]:
    body = decode(raw, _WHAT)
    request = validated(GENERATE_REQUEST, body, _REFERENCE)
    if request.cached_content is not None:
        raise _unsupported("cached contents are kept at Google; send the contents themselves", "cachedContent")
    turns = _Turns()
    for index, content in enumerate(request.contents):
        turns.add(index, content)
    return request, body, _system(request.system_instruction) + turns.messages


def count_tokens(raw: bytes) -> int:
    """An estimate (about four characters a token, as the router's context check counts)."""
    body = decode(raw, "a CountTokensRequest with `contents` or `generateContentRequest`")
    inner = body.get("generateContentRequest")
    _, _, messages = _read(orjson.dumps(inner) if isinstance(inner, dict) else raw)
    return max(1, len(orjson.dumps(messages)) // 4)


# -- the dialect --------------------------------------------------------------------------------


class GeminiDialect:
    """One request's dialect: its model and method come from the path, a stream's framing from
    the query."""

    protocol = "gemini"

    def __init__(self, model: str, method: str, sse: bool):
        self.model, self.method, self.sse = model, method, sse

    def parse(self, raw: bytes) -> Call:
        if not self.model or self.method not in _METHODS:
            raise ApiError(404, f"POST models/{self.model}:{self.method}: this server answers "
                                f"{GEMINI_PREFIX}MODEL:generateContent, :streamGenerateContent and :countTokens",
                           code="not_found")
        request, body, messages = _read(raw)
        tools, choice = _tool_choice(request, _tools(request))
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        if choice is not None:
            extra["tool_choice"] = choice
        config = request.generation_config or _NO_CONFIG
        _generation(config, extra)
        thinking = config.thinking_config or _NO_THINKING
        return Call(model=self.model, messages=messages, stream=self.method == "streamGenerateContent",
                    max_tokens=config.max_output_tokens, temperature=config.temperature,
                    stop=config.stop_sequences or None, extra=extra,
                    echo={"include_thoughts": bool(thinking.include_thoughts)},
                    session=session_field(body), route=route_options(body))

    def error_body(self, err: ApiError) -> bytes:
        return error_body(err)

    def body(self, call: Call, completion: Completion, facts: Facts | None) -> bytes:
        return response_body(call, completion, facts)

    def writer(self, call: Call) -> GeminiEvents:
        return GeminiEvents(call, self.sse)


async def _count(raw: bytes, scope: dict) -> bytes:
    return orjson.dumps({"totalTokens": count_tokens(raw)})


_COUNT = Plain(_count, error_body)


class GeminiRoutes:
    """Every path under `prefix` (one of GEMINI_PREFIXES): `bind` makes the handler of one request."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def bind(self, scope: dict) -> GeminiDialect | Plain:
        model, _, method = scope["path"][len(self.prefix):].rpartition(":")
        if method == "countTokens" and model:
            return _COUNT
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return GeminiDialect(model, method, sse=query.get("alt") == ["sse"])


def gemini_listing(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GET /v1/models' listing (router/server/models.py) as Gemini's `models` list."""
    listing = []
    for model in models:
        about = model.get("route") or {}
        entry: dict[str, Any] = {"name": f"models/{model['id']}", "displayName": model["id"],
                                 "description": f"route: {about.get('kind', 'model')}",
                                 "supportedGenerationMethods": list(_METHODS)}
        if about.get("context_window"):
            entry["inputTokenLimit"] = about["context_window"]
        listing.append(entry)
    return listing
