"""What route changes on purpose between what a model sent and what a client receives: the one
table the differential suite reads (tests/test_conformance.py). Anything not declared here must
arrive as the model sent it.

Each row: (client protocol, backend kind, what differs, why). `*` matches any. The `apply`
function turns the model's answer into what the client is declared to receive.
"""

from __future__ import annotations

import dataclasses

from tests.conformance.answer import Answer, Usage

__all__ = ["DECLARED", "HEADERS_ADDED", "apply"]

DECLARED: tuple[tuple[str, str, str, str], ...] = (
    ("*", "*", "secrets -> [REDACTED]",
     "every string that leaves the process is scrubbed of the config's secrets (router/redaction.py), signed "
     "thinking included: such a block no longer matches its signature, and the anthropic kind sends that tool "
     "turn with thinking off (backends/anthropic_thinking.py) rather than leak the key"),
    ("messages", "openai", "unsigned thinking is a thinking block with an empty signature",
     "an OpenAI-compatible model's reasoning has no signature; a Messages client needs a thinking block to show it"),
    ("chat", "openai", "no signed blocks", "an OpenAI-compatible model signs nothing"),
    ("gemini", "*", "no signed blocks", "Gemini's protocol has no place for another provider's thinking signatures: "
     "its thought parts carry the text"),
    ("gemini", "*", "cache writes count as input", "Gemini's usage has no cache-write count"),
    ("responses", "*", "cache writes count as input",
     "the Responses API has no field for cache writes; its input_tokens includes them, as OpenAI's does"),
    ("*", "litellm", "a beta billed above the price counted (context-1m-*) is a 400 naming anthropic_beta",
     "litellm's cost cannot count Anthropic's long-context price: no tenant may spend above what route counts "
     "(backends/client_fields.py); the anthropic kind counts it, the openai kind never sends Anthropic betas"),
    ("*", "openai", "no cache writes", "OpenAI's usage has no cache-write count (its prompt_tokens includes them)"),
)

# Headers route adds to every answer (the decision, for clients and operators to read).
HEADERS_ADDED = ("x-route-backend", "x-route-tier", "x-route-version")


def apply(protocol: str, kind: str, sent: Answer, secrets: tuple[str, ...] = ()) -> Answer:
    """What a `protocol` client is declared to receive when a `kind` backend sent `sent`."""
    answer = sent
    for secret in secrets:
        answer = _redacted(answer, secret)
    usage = answer.usage
    if protocol in ("responses", "gemini") or kind == "openai":  # no field for cache writes: they are input
        usage = Usage(usage.input + usage.cache_write, usage.output, usage.cache_read)
    unsigned = kind == "openai" or protocol == "gemini"
    return dataclasses.replace(answer, usage=usage, sealed=() if unsigned else answer.sealed)


def _redacted(answer: Answer, secret: str) -> Answer:
    def scrub(text: str) -> str:
        return text.replace(secret, "[REDACTED]")

    return dataclasses.replace(
        answer, text=scrub(answer.text), thinking=scrub(answer.thinking),
        sealed=tuple(dataclasses.replace(b, thinking=scrub(b.thinking)) for b in answer.sealed),
        calls=tuple(dataclasses.replace(c, name=scrub(c.name), arguments=scrub(c.arguments)) for c in answer.calls))
