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
- `tools[].function_declarations` -> function tools (`parametersJsonSchema` as it is; Google's
  OpenAPI `parameters` as JSON Schema: lower-case types, `nullable`); `toolConfig`'s mode ->
  `tool_choice` (AUTO, ANY -> required, or the one allowed function; NONE).
- `generationConfig`: `temperature`, `maxOutputTokens`, `stopSequences` -> the router's own;
  `topP`, `topK`, `seed`, `presencePenalty`, `frequencyPenalty` sent on; `responseMimeType:
  application/json` with `responseJsonSchema` or `responseSchema` -> `response_format`;
  `thinkingConfig` (`thinkingBudget`, `thinkingLevel`) -> `reasoning_effort`, and
  `includeThoughts` decides whether the answer's thinking comes back as thought parts.

Refused with a 400 naming the field: Google's server-side tools (Google Search, code
execution, URL context), parts only Google can read (a Files API `fileData`, executable code),
`cachedContent`, more than one candidate, output other than text. `thoughtSignature` is
accepted and not sent on: it is Google's seal, which no other provider reads. Gemini names no
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
from router.server.protocols.base import Call, Facts
from router.server.protocols.gemini_events import GeminiEvents, error_body, response_body
from router.server.protocols.gemini_schema import GENERATE_REQUEST, Content, GenerateContentRequest, Part
from router.server.protocols.validation import bad_request, decode, route_options, session_field, validated

__all__ = ["GEMINI_PREFIX", "GEMINI_PREFIXES", "GeminiDialect", "GeminiRoutes", "count_tokens", "gemini_listing"]

GEMINI_PREFIX = GEMINI_PREFIXES[0]  # Gemini CLI's; its models are listed here
_REFERENCE = "https://ai.google.dev/api/generate-content"
_WHAT = "a GenerateContentRequest with `contents`"
_METHODS = ("generateContent", "streamGenerateContent", "countTokens")
_LEVELS = frozenset({"minimal", "low", "medium", "high"})
_SENT_ON = ("top_p", "top_k", "seed", "presence_penalty", "frequency_penalty")  # as chat names them too
_CHOICES = {"ANY": "required", "NONE": "none"}
_WHY = "this router translates Gemini's protocol for backends of every kind"


def _unsupported(message: str, param: str) -> ApiError:
    return bad_request(f"`{param}`: {message} ({_WHY})", param, "unsupported_parameter")


# -- the request --------------------------------------------------------------------------------


def _json_schema(schema: Any) -> Any:
    """Google's OpenAPI subset as JSON Schema: `type: "OBJECT"` -> "object", `nullable: true`
    -> the type or null; `propertyOrdering` (Google's alone) dropped."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _json_schema(v) for k, v in schema.items() if k not in ("nullable", "propertyOrdering")}
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = kind.lower()
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
        for k, part in enumerate(content.parts):
            where = f"contents[{turn}].parts[{k}]"
            if part.function_call is not None:
                call = part.function_call
                call_id = call.id or f"call_{turn}_{k}"
                self._unanswered.setdefault(call.name, []).append(call_id)
                calls.append({"id": call_id, "type": "function",
                              "function": {"name": call.name, "arguments": orjson.dumps(call.args or {}).decode()}})
            elif part.text is not None:
                (thoughts if part.thought else texts).append(part.text)
            elif part.thought_signature is None:  # a part that is only a signature carries nothing to pass on
                _empty(part, where)
        message: Message = {"role": "assistant", "content": "".join(texts) or None}
        if thoughts:
            message["reasoning_content"] = "".join(thoughts)
        if calls:
            message["tool_calls"] = calls
        self.messages.append(message)

    def _user(self, turn: int, content: Content) -> None:
        parts: list[dict[str, Any]] = []
        for k, part in enumerate(content.parts):
            where = f"contents[{turn}].parts[{k}]"
            if part.function_response is not None:
                response = part.function_response
                waiting = self._unanswered.get(response.name) or []
                call_id = response.id or (waiting[0] if waiting else f"call_{turn}_{k}")
                if call_id in waiting:
                    waiting.remove(call_id)
                # Tool messages go first: each must follow the assistant turn that made its call.
                self.messages.append({"role": "tool", "tool_call_id": call_id,
                                      "content": orjson.dumps(response.response or {}).decode()})
            elif part.text is not None:
                if not part.thought:
                    parts.append({"type": "text", "text": part.text})
            elif part.inline_data is not None or part.file_data is not None:
                parts.append(_media(part, where))
            else:
                _empty(part, where)
        if len(parts) == 1 and parts[0]["type"] == "text":
            self.messages.append({"role": "user", "content": parts[0]["text"]})
        elif parts:
            self.messages.append({"role": "user", "content": parts})


def _tools(request: GenerateContentRequest) -> list[dict[str, Any]]:
    tools = []
    for i, tool in enumerate(request.tools or ()):
        for name in tool.model_extra or {}:
            raise _unsupported("Google's server-side tools run only at Google; declare functions instead",
                               f"tools[{i}].{name}")
        for declaration in tool.function_declarations or ():
            if declaration.parameters_json_schema is not None:
                parameters = declaration.parameters_json_schema
            elif declaration.parameters is not None:
                parameters = _json_schema(declaration.parameters)
            else:
                parameters = {"type": "object", "properties": {}}
            function: dict[str, Any] = {"name": declaration.name, "parameters": parameters}
            if declaration.description is not None:
                function["description"] = declaration.description
            tools.append({"type": "function", "function": function})
    return tools


def _tool_choice(request: GenerateContentRequest, tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    """The tools offered and chat's `tool_choice` for `toolConfig` (None: the default, auto)."""
    config = request.tool_config.function_calling_config if request.tool_config else None
    if config is None or not tools:
        return tools, None
    allowed = set(config.allowed_function_names or ())
    if config.mode == "ANY" and allowed:
        # chat cannot say "one of these": offer only those
        tools = [t for t in tools if t["function"]["name"] in allowed]
        if len(tools) == 1:
            return tools, {"type": "function", "function": {"name": tools[0]["function"]["name"]}}
    return tools, _CHOICES.get(config.mode or "AUTO")


def _effort(request: GenerateContentRequest) -> str | None:
    """`thinkingConfig` as chat's `reasoning_effort`; None where the model is to decide."""
    config = request.generation_config.thinking_config if request.generation_config else None
    if config is None:
        return None
    if config.thinking_level is not None:
        level = config.thinking_level.lower()
        if level not in _LEVELS:
            raise bad_request(f"`generationConfig.thinkingConfig.thinkingLevel` must be one of MINIMAL, LOW, "
                              f"MEDIUM, HIGH (got {config.thinking_level!r})", "generationConfig.thinkingConfig")
        return level
    budget = config.thinking_budget
    if budget is None or budget == -1:
        return None
    return reasoning_effort({"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"})


def _response_format(request: GenerateContentRequest) -> dict[str, Any] | None:
    config = request.generation_config
    if config is None or config.response_mime_type in (None, "text/plain"):
        return None
    if config.response_mime_type != "application/json":
        raise _unsupported(f"{config.response_mime_type!r} answers cannot be asked of every backend; "
                           "application/json and text/plain can", "generationConfig.responseMimeType")
    schema = config.response_json_schema if config.response_json_schema is not None else (
        _json_schema(config.response_schema) if config.response_schema is not None else None)
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}


def _generation(request: GenerateContentRequest, extra: dict[str, Any]) -> None:
    config = request.generation_config
    if config is None:
        return
    if config.candidate_count not in (None, 1):
        raise _unsupported("one candidate per request; send one request per answer", "generationConfig.candidateCount")
    if config.response_modalities and any(m.upper() != "TEXT" for m in config.response_modalities):
        raise _unsupported("text is the only output", "generationConfig.responseModalities")
    for name in _SENT_ON:
        value = getattr(config, name)
        if value is not None:
            extra[name] = int(value) if name == "top_k" else value
    response_format = _response_format(request)
    if response_format is not None:
        extra["response_format"] = response_format
    effort = _effort(request)
    if effort is not None:
        extra["reasoning_effort"] = effort


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
        _generation(request, extra)
        config = request.generation_config
        thinking = config.thinking_config if config is not None else None
        return Call(model=self.model, messages=messages, stream=self.method == "streamGenerateContent",
                    max_tokens=config.max_output_tokens if config else None,
                    temperature=config.temperature if config else None,
                    stop=(config.stop_sequences or None) if config else None, extra=extra,
                    echo={"include_thoughts": bool(thinking and thinking.include_thoughts)},
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
