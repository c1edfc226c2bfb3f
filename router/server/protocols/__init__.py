"""The protocols `route serve` speaks, each a dialect of one request flow (router/server/endpoint.py):

    chat.py        OpenAI chat completions     POST /v1/chat/completions   (schema: chat_schema.py)
    messages.py    Anthropic Messages          POST /v1/messages           (schema: messages_schema.py)
    responses.py   OpenAI Responses            POST /v1/responses          (schema: responses_schema.py)
    gemini.py      Gemini generateContent      POST /v1beta/models/M:METHOD (schema: gemini_schema.py,
                                                                            answers: gemini_events.py)

base.py says what a dialect is, and is the one way a body is decoded and checked.
"""

from __future__ import annotations

from router.server.errors import ApiError

__all__ = ["ANTHROPIC_PATHS", "GEMINI_PREFIXES", "error_body_for", "is_gemini"]

ANTHROPIC_PATHS = ("/v1/messages", "/messages")  # and what is below them (count_tokens)
# Gemini CLI asks under /v1beta, the google-genai SDK under /v1: POST .../models/{model}:{method}
GEMINI_PREFIXES = ("/v1beta/models/", "/v1/models/")


def is_gemini(path: str) -> bool:
    """A path of Gemini's protocol: anything under /v1beta, or a model's method under /v1
    (GET /v1/models/{name} is OpenAI's)."""
    return path.startswith("/v1beta/") or (path.startswith("/v1/models/") and ":" in path)


def error_body_for(path: str, err: ApiError) -> bytes:
    """`err` in the shape the clients of `path` parse: Anthropic's under /v1/messages, Google's
    under /v1beta, else OpenAI's."""
    if is_gemini(path):
        from router.server.protocols.gemini_events import error_body as gemini_error_body

        return gemini_error_body(err)
    if path.startswith(ANTHROPIC_PATHS):
        from router.server.protocols.messages import error_body

        return error_body(err)
    return err.body()
