"""The protocols `route serve` speaks, each a dialect of one request flow (router/server/endpoint.py):

    chat.py        OpenAI chat completions     POST /v1/chat/completions   (schema: chat_schema.py)
    messages.py    Anthropic Messages          POST /v1/messages           (schema: messages_schema.py)
    responses.py   OpenAI Responses            POST /v1/responses          (schema: responses_schema.py)

base.py says what a dialect is; validation.py is the one way a body is decoded and checked.
"""

from __future__ import annotations

from router.server.errors import ApiError

__all__ = ["ANTHROPIC_PATHS", "error_body_for"]

ANTHROPIC_PATHS = ("/v1/messages", "/messages")  # and what is below them (count_tokens)


def error_body_for(path: str, err: ApiError) -> bytes:
    """`err` in the shape the clients of `path` parse: Anthropic's under /v1/messages, else OpenAI's."""
    if path.startswith(ANTHROPIC_PATHS):
        from router.server.protocols.messages import error_body

        return error_body(err)
    return err.body()
