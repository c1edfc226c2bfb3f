"""Every other hosted provider (Anthropic, Gemini, Bedrock, ...) through litellm.

litellm takes seconds and ~200 MB to import, so it is imported on the first call of such a
backend, never at CLI start; its offline cost map is forced so the import does no network I/O.
Retries are the call path's, so litellm's own are switched off. This module is only the wire
call and the translation of litellm's exceptions.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from backends.assembly import Delta
from backends.base import Backend, Health
from backends.capabilities import Capabilities
from backends.client_fields import beta_refusal, openai_shaped
from backends.deadline import Deadline
from backends.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    MalformedResponse,
    Unreachable,
    Where,
)
from backends.faults import client_header, error_for_status, failed_writing, refused, scrub
from backends.http_errors import connection_failure, parse_retry_after
from backends.openai_http import OPENAI_CHAT_FIELDS
from backends.params import ChatParams
from backends.types import Message, Price, Request, Usage

__all__ = ["LiteLLMBackend", "load_litellm"]


def load_litellm() -> Any:
    """Import litellm quietly and offline (no cost-map fetch, no telemetry, none of the catalogs
    it would fetch on its own, such as Anthropic's beta headers on a first Anthropic call)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


class LiteLLMBackend(Backend):
    kind = "litellm"
    capabilities: ClassVar[Capabilities] = Capabilities(tools=True, seed=True, vision=True)
    params_model = ChatParams

    @property
    def shape(self) -> str:
        # litellm writes a request per provider: `anthropic/...` and `openai/...` differently.
        provider = self.model.split("/", 1)[0] if "/" in self.model else "default"
        return f"litellm:{provider}"

    def _kwargs(self, request: Request, deadline: Deadline, *, stream: bool) -> dict[str, Any]:
        # The client's OpenAI fields (and Anthropic's `thinking`, which litellm maps per provider);
        # litellm drops what a provider cannot take (`drop_params`) rather than failing.
        # The operator's settings (backends/client_fields.py) go over the client's, and litellm's
        # own arguments (where, with which key, no retries of its own) over everything.
        fields = {k: v for k, v in request.extra.items() if k in OPENAI_CHAT_FIELDS or k == "thinking"}
        configured, fixed = self.settings.configured()
        kwargs = openai_shaped({**configured, **fields}, request, fixed)
        kwargs.update(model=self.model, messages=_litellm_messages(request.messages), num_retries=0, max_retries=0,
                      drop_params=True)
        kwargs.update(self._connection(request, deadline))
        if stream:
            kwargs.update(stream=True, stream_options={"include_usage": True})
        return kwargs

    def _connection(self, request: Request, deadline: Deadline) -> dict[str, Any]:
        """litellm's arguments for where the call goes and how long it may take: timeout, base,
        headers, key, resolved in that order (the first missing setting is the one reported)."""
        remaining = deadline.remaining()
        kwargs: dict[str, Any] = {
            "timeout": self.settings.timeout_s if remaining is None else max(0.001, remaining)}
        if self.settings.base_url:
            kwargs["api_base"] = self.settings.resolve(self.settings.base_url)
        if headers := self._headers(request):
            kwargs["extra_headers"] = headers
        if key := self.settings.api_key():
            kwargs["api_key"] = key
        return kwargs

    def _headers(self, request: Request) -> dict[str, str]:
        headers = dict(self.settings.resolve(self.settings.headers))
        if request.extra.get("anthropic_beta"):  # litellm sends it on to Anthropic models
            betas = client_header("anthropic-beta", request.extra["anthropic_beta"], param="anthropic_beta",
                                  where=self.where())
            if (priced := beta_refusal(betas)) is not None:  # its cost cannot count the long-context price
                raise refused(priced, param="anthropic_beta", where=self.where())
            headers["anthropic-beta"] = ",".join(betas)
        return headers

    async def check(self, timeout_s: float = 5.0) -> Health:
        """Keyed; not called, to spend nothing (and not to pay for importing litellm)."""
        self.settings.api_key()
        where = f" at {self.settings.base_url}" if self.settings.base_url else ""
        note = "key present" if self.settings.api_key_env else "no key configured"
        return Health(True, f"litellm model {self.model}{where} ({note}; not called, to spend nothing)")

    def _translate(self, exc: Exception) -> BackendError:
        """litellm's exception in our tree, by backends/faults.py: what the provider answered
        by its status; what never reached it by what stopped it (`_unanswered`)."""
        where = self.where()
        unanswered = _unanswered(exc, where)
        if unanswered is not None:
            return unanswered
        status = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or getattr(exc, "headers", None) or {}
        message = str(getattr(exc, "message", exc))
        if isinstance(status, int) and status >= 400:
            import httpx

            error = error_for_status(status, httpx.Headers(dict(headers)), _provider_body(response, message), **where)
            if status == 429 and getattr(error, "retry_after", None) is None:
                error.retry_after = parse_retry_after(dict(headers).get("retry-after"))  # type: ignore[attr-defined]
            return error
        return BackendUnavailable(f"{type(exc).__name__}: {scrub(message)}", **where)

    def cost(self, usage: Usage) -> float:
        price = self.settings.price
        if price.input_per_mtok or price.output_per_mtok:
            return super().cost(usage)
        # No configured price: litellm's offline map knows most hosted models.
        costs = load_litellm().model_cost
        entry = costs.get(self.model) or costs.get(self.model.split("/", 1)[-1]) or {}
        per_mtok = {key: float(entry.get(key) or 0) * 1e6 for key in (
            "input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
            "cache_creation_input_token_cost")}
        return Price(per_mtok["input_cost_per_token"], per_mtok["output_cost_per_token"],
                     per_mtok["cache_read_input_token_cost"] or None,
                     per_mtok["cache_creation_input_token_cost"] or None).cost(usage)

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        self.settings.api_key()  # a missing key fails here, before paying for the import
        litellm = load_litellm()
        response = await litellm.acompletion(**self._kwargs(request, deadline, stream=stream))
        if not stream:
            for delta in self._message(response):
                yield delta
            return
        try:
            async for event in response:
                yield _event(event)
        finally:
            close = getattr(response, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing a half-read stream may raise; the answer is already decided
                    pass

    def _message(self, response: Any) -> list[Delta]:
        """The answer: its signed thinking first, a Delta per block (litellm's `thinking_blocks`,
        each with its own signature), then the rest."""
        try:
            choice = response.choices[0]
            calls = [{**c.model_dump(), "index": i} for i, c in enumerate(choice.message.tool_calls or [])]
            sealed = [_sealed(block) for block in _thinking_blocks(choice.message)]
            reasoning = "" if sealed else getattr(choice.message, "reasoning_content", None) or ""
            return [*sealed, Delta(text=choice.message.content or "", tool_calls=calls,
                                   usage=_usage(getattr(response, "usage", None)), finish_reason=choice.finish_reason,
                                   simulated=_is_simulated(response), reasoning=reasoning)]
        except (AttributeError, IndexError, TypeError) as exc:
            raise MalformedResponse(f"unexpected response shape: {response!r:.200}", **self.where()) from exc


def _litellm_messages(messages: list[Message]) -> list[Message]:
    """`messages` as litellm takes them: a tool result's `is_error` (Anthropic's flag, which the
    text of the result already says) is not a chat field, and some providers refuse it."""
    if not any("is_error" in m for m in messages):
        return messages
    return [{k: v for k, v in m.items() if k != "is_error"} if "is_error" in m else m for m in messages]


def _thinking_blocks(holder: Any) -> list[Mapping[str, Any]]:
    """The thinking blocks litellm read from Anthropic (signed or redacted), on a message or a delta."""
    blocks = getattr(holder, "thinking_blocks", None) or ()
    return [b for b in blocks if isinstance(b, Mapping)]


def _sealed(block: Mapping[str, Any]) -> Delta:
    if block.get("type") == "redacted_thinking":
        return Delta(redacted=(str(block.get("data", "")),))
    return Delta(reasoning=str(block.get("thinking") or ""), signature=str(block.get("signature") or ""))


def _unanswered(exc: BaseException, where: Where) -> BackendError | None:
    """The error when no provider answered: a timeout, a refused connection (litellm calls these
    HTTP 500), a key that is not there, a request litellm could not write for the provider."""
    if isinstance(exc, TimeoutError) or type(exc).__name__ == "Timeout":
        return BackendTimeout(f"no answer within the deadline ({type(exc).__name__})", **where)
    refused = connection_failure(exc)
    if refused is not None:
        return Unreachable(f"cannot connect ({refused})", **where)
    local = _local_failure(exc)
    if local is None:
        return None
    if _about_credentials(local):
        return AuthError(f"no usable API key for the provider ({scrub(str(local))}); check the backend's api_key",
                         **where)
    return failed_writing(local, where)


# Errors that are Python's own, raised while litellm wrote the request (no provider answered).
_LOCAL = (TypeError, AttributeError, KeyError, IndexError, ValueError)
# litellm's function names say which side of the call failed: writing the request, or reading an answer.
_READING = ("response", "chunk", "stream", "__anext__", "iter")
_WRITING = ("request", "param", "message", "prompt", "tool", "content")


def _local_failure(exc: BaseException) -> BaseException | None:
    """The error that stopped litellm before any provider answered, however deeply litellm
    wrapped it (it reports a request it could not write as APIConnectionError, a missing key
    as a 500): a plain Python error raised while writing the request, or the OpenAI SDK's own
    (not an HTTP answer). None when an answer is in the chain, or the error came up reading one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _answered(current):
            return None
        if type(current).__name__ == "OpenAIError" and type(current).__module__.startswith("openai"):
            return current
        if isinstance(current, _LOCAL) and _while_writing(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def _answered(exc: BaseException) -> bool:
    """Whether `exc` is an HTTP answer's error (the SDK's or httpx's), not one litellm made up
    (litellm's own exceptions subclass the SDK's, with a response of their making)."""
    if type(exc).__module__.startswith("litellm"):
        return False
    openai, httpx = sys.modules.get("openai"), sys.modules.get("httpx")
    return (openai is not None and isinstance(exc, openai.APIStatusError)) or (
        httpx is not None and isinstance(exc, httpx.HTTPStatusError))


def _while_writing(exc: BaseException) -> bool:
    """Whether `exc` came up writing the request, by the innermost of litellm's functions that
    say which side they are on (transform_request vs transform_response, a stream's chunks)."""
    for frame, _ in reversed(list(traceback.walk_tb(exc.__traceback__))):
        name = frame.f_code.co_name.lower()
        if any(word in name for word in _READING):
            return False
        if any(word in name for word in _WRITING):
            return True
    return False


def _about_credentials(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "credentials" in text or "api_key" in text or "api key" in text


def _provider_body(response: Any, message: str) -> str:
    """The provider's own error body when litellm kept its response, else litellm's message."""
    text = getattr(response, "text", None)
    try:
        return text if isinstance(text, str) and text.strip().startswith("{") else message
    except Exception:  # a streamed response litellm never read: its message says the same
        return message


def _event(event: Any) -> Delta:
    """One litellm stream chunk as a Delta."""
    text, reasoning, finish = "", "", None
    calls: list[dict[str, Any]] = []
    seals: list[Delta] = []
    for choice in getattr(event, "choices", None) or ():
        finish = getattr(choice, "finish_reason", None) or finish
        delta = getattr(choice, "delta", None)
        text += getattr(delta, "content", None) or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        calls += [c.model_dump() if hasattr(c, "model_dump") else dict(c) for c in getattr(delta, "tool_calls", None) or ()]
        seals += map(_sealed, _thinking_blocks(delta))  # a block's text streams alone, then its signature
    return Delta(text=text, reasoning=reasoning, tool_calls=calls, usage=_usage(getattr(event, "usage", None)),
                 finish_reason=finish, simulated=_is_simulated(event), **_seal(seals))


def _seal(seals: list[Delta]) -> dict[str, Any]:
    """What a chunk's thinking blocks add: the signature that ends a block, redacted blocks."""
    return {"signature": next((s.signature for s in reversed(seals) if s.signature), ""),
            "redacted": tuple(data for s in seals for data in s.redacted)}


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    prompt = getattr(raw, "prompt_tokens", None)
    completion = getattr(raw, "completion_tokens", None)
    if prompt is None and completion is None:
        return None
    details = getattr(raw, "prompt_tokens_details", None)
    reasoning = getattr(getattr(raw, "completion_tokens_details", None), "reasoning_tokens", None)
    return Usage(input_tokens=int(prompt or 0), output_tokens=int(completion or 0),
                 thinking_tokens=_int(reasoning),
                 cache_read_tokens=_int(getattr(details, "cached_tokens", None)
                                        or getattr(raw, "cache_read_input_tokens", None)),
                 cache_write_tokens=_int(getattr(raw, "cache_creation_input_tokens", None)))


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _is_simulated(response: Any) -> bool:
    return getattr(response, "system_fingerprint", None) == "simulated"
