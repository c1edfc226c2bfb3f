"""The one mapping from an upstream's answer to whose fault it is (backends/faults.py): by
status, by what the body says in each provider's shape, and what a client is shown of it."""

from __future__ import annotations

import json

import httpx
import pytest

from backends.errors import (
    AuthError,
    BackendUnavailable,
    BadRequest,
    NotServed,
    RateLimited,
    fault_of,
)
from backends.faults import client_header, detail_of, error_for_status, refuses_thinking, scrub, stream_error

pytestmark = pytest.mark.unit

WHERE = {"backend": "b", "model": "m"}


def _error(status: int, body: object, **headers: str):
    text = body if isinstance(body, str) else json.dumps(body)
    return error_for_status(status, httpx.Headers(headers), text, **WHERE)


@pytest.mark.parametrize("status, kind, fault", [
    (400, BadRequest, "request"), (413, BadRequest, "request"), (422, BadRequest, "request"),
    (451, BadRequest, "request"), (418, BadRequest, "request"),
    (401, AuthError, "credential"), (403, AuthError, "credential"), (402, AuthError, "credential"),
    (429, RateLimited, "pressure"),
    (404, NotServed, "backend"), (405, NotServed, "backend"),
    (408, BackendUnavailable, "backend"), (409, BackendUnavailable, "backend"),
    (500, BackendUnavailable, "backend"), (503, BackendUnavailable, "backend"), (529, BackendUnavailable, "backend"),
])
def test_each_status_is_someones_fault(status, kind, fault):
    error = _error(status, {"error": {"message": "nope"}})
    assert type(error) is kind and fault_of(error) == fault and error.status == status and "nope" in str(error)


def test_openai_names_the_field_and_its_reason():
    error = _error(400, {"error": {"message": "This model's maximum context length is 8192 tokens.",
                                   "type": "invalid_request_error", "param": "messages",
                                   "code": "context_length_exceeded"}})
    assert isinstance(error, BadRequest) and error.param == "messages" and error.code == "context_length_exceeded"


def test_anthropic_names_the_field_in_its_message():
    error = _error(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": "max_tokens: Field required"}})
    assert isinstance(error, BadRequest) and error.param == "max_tokens" and error.code == "invalid_request"
    long_prompt = _error(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "prompt is too long: 210000 tokens > 200000"}})
    assert long_prompt.code == "context_length_exceeded"
    beta = _error(400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                        "Unexpected value(s) `5` for the `anthropic-beta` header. Please consult our documentation."}})
    assert beta.param == "anthropic-beta"


def test_a_litellm_proxy_refusing_a_field_is_the_requests_fault_not_the_keys():
    """A LiteLLM proxy answers 401 to a field a client may not set; read as the key failing, it
    opened the backend's breaker for every client."""
    body = {"error": {"message": "Authentication Error, Rejected Request: api_base is not allowed in request body. "
                                 "Clientside passthrough requires explicit admin opt-in.",
                      "type": "auth_error", "param": "None", "code": "401"}}
    error = _error(401, body)
    assert isinstance(error, BadRequest) and error.param == "api_base"
    assert isinstance(_error(401, {"error": {"message": "Incorrect API key provided"}}), AuthError)


def test_no_quota_is_the_keys_fault_not_pressure():
    error = _error(429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                   "code": "insufficient_quota"}})
    assert isinstance(error, AuthError)
    limited = _error(429, {"error": {"message": "slow down"}}, **{"retry-after": "7"})
    assert isinstance(limited, RateLimited) and limited.retry_after == 7


def test_a_not_found_naming_a_field_is_the_requests_and_one_naming_the_model_the_configs():
    assert isinstance(_error(404, {"error": {"message": "No such file", "param": "file_id"}}), BadRequest)
    assert isinstance(_error(404, {"message": "The model `m` does not exist.", "type": "NotFoundError",
                                   "param": "model", "code": 404, "object": "error"}), NotServed)


@pytest.mark.parametrize("body", [
    {"object": "error", "message": "bad value", "type": "BadRequestError", "param": "top_k", "code": 400},  # vLLM
    {"detail": "bad value for top_k"},  # FastAPI
    "bad value, plain text",
])
def test_every_body_shape_gives_its_message(body):
    detail = detail_of(body if isinstance(body, str) else json.dumps(body))
    assert "bad value" in detail.message


def test_what_a_client_is_shown_has_no_traceback_and_no_server_path():
    leaked = ("litellm.APIConnectionError: 'str' object has no attribute 'get'\nTraceback (most recent call last):\n"
              '  File "/srv/app/.venv/lib/python3.11/site-packages/litellm/main.py", line 944, in acompletion\n'
              "    response = await x()\nAttributeError: 'str' object has no attribute 'get'")
    shown = scrub(leaked)
    assert shown == "litellm.APIConnectionError: 'str' object has no attribute 'get'"
    assert scrub("failed in /home/deploy/route/backends/x.py at line 3") == "failed in [path] at line 3"
    assert len(scrub("x" * 5000)) <= 300
    error = _error(500, {"error": {"message": leaked}})
    assert "Traceback" not in str(error) and "site-packages" not in str(error)


@pytest.mark.parametrize("kind, cls", [("invalid_request_error", BadRequest), ("authentication_error", AuthError),
                                       ("rate_limit_error", RateLimited), ("overloaded_error", BackendUnavailable),
                                       ("api_error", BackendUnavailable), (None, BackendUnavailable)])
def test_a_stream_error_event_by_its_type(kind, cls):
    assert type(stream_error(kind, "said so", WHERE)) is cls


@pytest.mark.parametrize("values", [5, "one-string", [5], ["ok", "line\nbreak"], ["tab\there"]])
def test_a_header_value_a_client_sent_is_refused_naming_its_field(values):
    with pytest.raises(BadRequest) as refused:
        client_header("anthropic-beta", values, param="anthropic_beta", where=WHERE)
    assert refused.value.param == "anthropic_beta" and fault_of(refused.value) == "request"
    assert client_header("anthropic-beta", ["a-2025-01-01", "b"], param="anthropic_beta", where=WHERE) == [
        "a-2025-01-01", "b"]


def test_a_refused_thinking_block_is_the_requests_fault_and_says_so():
    """What the sessions' reasoning round trip reads: a signature the provider will not verify."""
    body = {"type": "error", "error": {"type": "invalid_request_error", "message":
            "messages.1.content.0.thinking.signature: Invalid `signature` in `thinking` block"}}
    error = _error(400, body)
    assert isinstance(error, BadRequest) and error.param == "messages.1.content.0.thinking.signature"
    assert refuses_thinking(error) and fault_of(error) == "request"
    assert not refuses_thinking(_error(400, {"error": {"message": "max_tokens: too large"}}))
    assert not refuses_thinking(_error(500, {"error": {"message": "thinking failed on our side"}}))
