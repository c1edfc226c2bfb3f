"""Any OpenAI-compatible chat-completions server, over HTTP directly.

vLLM, mlx-vlm, NVIDIA NIM and llama.cpp serve DiffusionGemma this way, and Mercury's API is one
too, so this is the fast path: the pooled HTTP transport (backends/http_transport.py), no SDK in
between. This module only translates: the request body and headers, and the answer back as
Deltas; the base class assembles the answer and the call path retries.

What it sends of what the client asked for, by one rule:

- OpenAI's own API (api.openai.com) refuses what it does not know, so it gets only the fields
  of its chat-completions schema, and messages without the `cache_control` markers other
  providers read;
- every other OpenAI-compatible server (vLLM, NIM, llama.cpp, Mercury, OpenRouter, a LiteLLM
  proxy) takes vendor extensions and ignores what it does not know, so it gets everything the
  client sent: `top_k`, `chat_template_kwargs`, `cache_control` markers...;
- both: never the operator's fields (endpoints, keys, headers: backends/client_fields.py);
  Anthropic's thinking (a `thinking` object from a /v1/messages client, the signed
  `thinking_blocks` of earlier turns) has no place in a chat request -- `reasoning_effort`
  carries its meaning, and only Anthropic can read its signatures -- while a `thinking` flag is
  route's own switch for the local engine, which `route engine serve` takes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

import orjson

from backends.anthropic_format import ANTHROPIC_ONLY
from backends.assembly import Delta, Fold
from backends.base import Backend, BackendSettings, Health
from backends.capabilities import Capabilities
from backends.client_fields import openai_shaped, operator_owned
from backends.deadline import Deadline
from backends.errors import BackendError, MalformedResponse
from backends.faults import failed_writing
from backends.http_errors import is_transport_error
from backends.http_transport import HttpTransport, Reply, check_finished, json_event, json_events
from backends.params import ChatParams
from backends.served import not_served_hint, served_models, serves
from backends.sse_template import template_runs
from backends.thinking import reasoning_of  # thinking hook
from backends.types import Message, Request, Usage

__all__ = ["OPENAI_CHAT_FIELDS", "OpenAIBackend", "chat_messages", "is_openai_itself", "request_fields"]

_DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"

# The request fields of OpenAI's chat-completions API.
OPENAI_CHAT_FIELDS = frozenset({
    "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
    "presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
    "safety_identifier", "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature",
    "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
})


def is_openai_itself(base_url: str | None) -> bool:
    host = urlsplit(base_url or "").hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


def request_fields(extra: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """The client's extra fields an upstream is sent (`strict`: OpenAI's own API)."""
    out = {}
    for key, value in extra.items():
        if (key == "thinking" and not isinstance(value, bool)) or key in ANTHROPIC_ONLY:
            continue
        if key not in OPENAI_CHAT_FIELDS if strict else operator_owned(key):
            continue
        out[key] = value
    return out


def chat_messages(messages: list[Message], *, strict: bool) -> list[Message]:
    """`messages` for an OpenAI-compatible upstream (`strict`: OpenAI's own API), copying only
    what changes."""
    return [_upstream_message(m, strict) for m in messages]


def _upstream_message(message: Message, strict: bool) -> Message:
    content = message.get("content")
    parts_marked = strict and isinstance(content, list) and any(
        isinstance(p, dict) and "cache_control" in p for p in content)
    # A tool result's `is_error` is Anthropic's: chat has no such field (the text says "Error: " instead).
    dropped = ("thinking_blocks", "cache_control", "is_error") if strict else ("thinking_blocks", "is_error")
    if not parts_marked and not any(key in message for key in dropped):
        return message
    out = {k: v for k, v in message.items() if k not in dropped}
    if parts_marked and isinstance(content, list):
        out["content"] = [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, dict) else p
                          for p in content]
    return out


class OpenAIBackend(Backend):
    kind = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, seed=True, vision=True, drafts=True)
    params_model = ChatParams
    wire_task = False  # aiohttp releases a connection without awaiting (Backend.wire_task)

    def __init__(self, settings: BackendSettings):
        super().__init__(settings)
        # For messages: as configured, so a ${NAME} in it never shows its value.
        shown = (settings.base_url or _DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        self._http = HttpTransport(shown, self.where())
        self._strict = is_openai_itself(settings.base_url)  # refuses fields it does not know

    @property
    def endpoint(self) -> str:
        return self._http.shown

    @property
    def shape(self) -> str:
        # OpenAI's own API is sent its schema's fields only; other servers everything (the module's rule).
        return "openai:strict" if self._strict else "openai:compatible"

    def _headers(self) -> dict[str, str]:
        headers = self.settings.resolve(self.settings.headers)
        key = self.settings.api_key()
        return {**headers, "Authorization": f"Bearer {key}"} if key else headers

    def _payload(self, request: Request, *, stream: bool) -> dict[str, Any]:
        """The client's fields as the module's rule says, under the config's
        (backends/client_fields.py: what the config sets, the config decides)."""
        configured, fixed = self.settings.configured()
        payload = openai_shaped({**configured, **request_fields(request.extra, strict=self._strict)}, request, fixed)
        payload["model"] = self.model
        payload["messages"] = chat_messages(request.messages, strict=self._strict)
        if stream:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        return payload

    def _translate(self, exc: Exception) -> BackendError:
        return self._http.translate(exc)

    async def check(self, timeout_s: float = 5.0) -> Health:
        """GET /models: reachable, the key (if any) accepted, and our model among those served."""
        base = self.endpoint.removesuffix("/chat/completions")
        try:
            async with self._http.get(self.settings.url("/models", _DEFAULT_BASE_URL), self._headers(),
                                      timeout_s) as response:
                status, headers, body = response.status, response.headers, await response.read()
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            return Health(False, f"cannot reach {base} ({type(exc).__name__}); is the server running?")
        if status in (401, 403):
            return Health(False, f"{base} refused the key (HTTP {status})")
        if status >= 400:
            return Health(False, f"{base}/models answered HTTP {status}")
        return self._listing_health(base, headers, body)

    def _listing_health(self, base: str, headers: Any, body: bytes) -> Health:
        """What a server's model list says of this backend's model."""
        simulated = " [SIMULATED]" if headers.get("x-simulated") == "true" else ""
        try:
            listed = orjson.loads(body)
        except ValueError:
            listed = {}
        served = served_models(listed)
        if not serves(self.model, listed):
            problem = f"{base} does not serve {self.model!r}; {not_served_hint(self.model, served)}"
            if headers.get("x-sim-any-model") == "true":
                # The lenient simulator answers every name; a real server (vLLM) would answer 404.
                return Health(True, f"reachable at {base}{simulated}, which answers any name, but {problem}")
            return Health(False, problem)
        if served and self.model not in served:  # llama.cpp: its .gguf's path, answering to our name too
            return Health(True, f"reachable at {base}{simulated}; llama.cpp serving {', '.join(served)}, "
                                f"which answers as {self.model!r}")
        return Health(True, f"reachable at {base}{simulated}")

    # -- the wire call ----------------------------------------------------------------------

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        try:
            payload = self._payload(request, stream=stream)
        except (TypeError, ValueError, AttributeError) as exc:  # a value of the client's it cannot write
            raise failed_writing(exc, self.where()) from exc
        async with self._http.post(self.settings.url("/chat/completions", _DEFAULT_BASE_URL), payload,
                                   self._headers(), deadline.remaining(), self.settings.timeout_s) as reply:
            if not stream or reply.whole:
                yield self._message(await reply.body(), reply.simulated)
                return
            # Mercury's `diffusing: true` (in params or extra) streams the whole draft in every event.
            if payload.get("diffusing"):
                async for delta in self._drafts(reply):
                    yield delta
                return
            finished = False
            async for batch in reply.events(_is_done):
                for delta in self._deltas(batch, reply.simulated):
                    finished = finished or delta.finish_reason is not None
                    yield delta
            check_finished(reply, finished, "no finish_reason, no [DONE]", self.where())

    async def _drafts(self, reply: Reply) -> AsyncIterator[Delta]:
        async for batch in reply.events(_is_done):
            for data in batch:
                yield self._draft(self._parse(data), reply.simulated)

    def _message(self, body: bytes, simulated: bool) -> Delta:
        try:
            data = orjson.loads(body)
            choice = data["choices"][0]
            message = choice.get("message") or {}
            calls = [{**call, "index": i} for i, call in enumerate(message.get("tool_calls") or ())]
            return Delta(text=message.get("content") or "", tool_calls=calls, usage=_usage(data.get("usage")),
                         finish_reason=choice.get("finish_reason"), simulated=simulated,
                         reasoning=reasoning_of(message))  # thinking hook: backends/thinking.py
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponse(f"not an OpenAI chat completion: {body[:200]!r}", **self.where()) from exc

    def _parse(self, data: bytes) -> dict[str, Any]:
        return json_event(data, self.where)

    def _deltas(self, batch: list[bytes], simulated: bool) -> list[Delta]:
        """The events of one read as few Deltas as keep their order: consecutive events fold
        into one (a Delta is read as thinking, then text, then tool calls), so a read of a
        hundred tokens costs the layers above one chunk. A run of plain pieces of content is
        read from its strings alone (backends/sse_template.py); other events are parsed whole."""
        fold = Fold(simulated)
        for part in template_runs(batch, b'"content":', _plain_content):
            if isinstance(part, str):
                if part:
                    fold.text(part)
            else:
                self._fold_events(fold, part)
        return fold.done()

    def _fold_events(self, fold: Fold, batch: list[bytes]) -> None:
        for event in json_events(batch, self.where):
            for choice in event.get("choices") or ():
                delta = choice.get("delta") or {}
                fold.finish = choice.get("finish_reason") or fold.finish
                thought = delta.get("reasoning_content") or delta.get("reasoning")  # thinking hook
                if thought:
                    fold.thinking(thought if isinstance(thought, str) else reasoning_of(delta))
                text = delta.get("content")
                if text:
                    fold.text(text)
                calls = delta.get("tool_calls")
                if calls:
                    fold.calls(calls)
            usage = event.get("usage")
            if usage is not None:
                fold.usage = _usage(usage) or fold.usage

    def _draft(self, event: dict[str, Any], simulated: bool) -> Delta:
        """An event of a `diffusing` stream: its content replaces the draft (shown by `route
        --watch`), never appended."""
        text, finish = "", None
        calls: list[dict[str, Any]] = []
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason") or finish
            calls.extend(delta.get("tool_calls") or ())
            text += delta.get("content") or ""
        return Delta(draft=text, tool_calls=calls, usage=_usage(event.get("usage")), finish_reason=finish,
                     simulated=simulated)

    async def aclose(self) -> None:
        await self._http.aclose()


# The event that ends a stream. A builtin, not a function: Reply.events scans every read with it.
_is_done: Callable[[bytes], bool] = b"[DONE]".__eq__


def _plain_content(event: Any) -> str | None:
    """The content of an event whose only effect in `_deltas` is that piece of text: one choice,
    not finished, no thinking, tool calls or usage (backends/sse_template.py)."""
    if type(event) is not dict or event.get("usage") is not None:
        return None
    choices = event.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict or choices[0].get("finish_reason"):
        return None
    delta = choices[0].get("delta")
    if type(delta) is not dict or delta.get("reasoning_content") or delta.get("reasoning") or delta.get("tool_calls"):
        return None
    content = delta.get("content")
    return content if type(content) is str else None


def _usage(raw: Any) -> Usage | None:
    """OpenAI's usage, with what its details say about caching and reasoning (and the fields
    Anthropic-backed proxies and DeepSeek add for the same)."""
    if not isinstance(raw, dict):
        return None
    prompt = _details(raw, "prompt_tokens_details")
    completion = _details(raw, "completion_tokens_details")
    return Usage(input_tokens=_count(raw.get("prompt_tokens")), output_tokens=_count(raw.get("completion_tokens")),
                 thinking_tokens=_count(completion.get("reasoning_tokens")),
                 cache_read_tokens=_count(prompt.get("cached_tokens") or raw.get("cache_read_input_tokens")
                                          or raw.get("prompt_cache_hit_tokens")),
                 cache_write_tokens=_count(raw.get("cache_creation_input_tokens")))


def _details(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0
