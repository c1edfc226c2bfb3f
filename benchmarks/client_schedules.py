"""How four real coding agents retry a failing request, replayed: each is a function of `send`
(one HTTP request, returning its status and headers), `sleep` (the client's wait; the benchmark
keeps it in virtual time) and a seeded `rng` (their jitter), and it returns when the client
gives up or is answered. Sources are each client's own code, as of early 2026:

- Codex (codex-rs): a turn makes up to 5 requests (`request_max_retries` 4, codex-client
  retry.rs: 200 ms x 2^(n-1), x U(0.9, 1.1)); a failed turn is retried up to 5 times
  (`stream_max_retries`, core util.rs: the same backoff). 30 requests at most. It honours
  Retry-After (seconds) as observed in issue 38: a server's wait replaces its backoff.
- aider: its own loop (aider/models.py: the wait starts at 0.125 s and doubles before each
  retry; it gives up past 60 s, so 0.25 ... 32 s, 9 calls) around litellm, which calls the
  OpenAI SDK with its default 2 retries (`_calculate_retry_timeout`: `retry-after-ms`, else
  Retry-After, used when 0 < wait <= 60 s; else 0.5 s x 2^n up to 8 s, less up to 25% jitter;
  `x-should-retry` decides first). 27 requests at most.
- OpenCode: its session loop (session/retry.ts: `retry-after-ms`, else Retry-After, else 2 s x
  2^(n-1); no cap once a response had headers) around the AI SDK's (`maxRetries` 2, 2 s then
  4 s, a header's wait used when 0 <= wait < 60 s). OpenCode never stops by itself; the replay
  stops after 7 session attempts, as the run measured in issue 38 did (21 requests).
- Claude Code: its own loop in the Anthropic SDK's manner (`maxRetries` 10; Retry-After in
  whole seconds when sent, else 500 ms x 2^(n-1) up to 32 s plus up to 25% jitter;
  `x-should-retry` decides first). 11 requests at most.
- The OpenAI and the Anthropic Python SDKs, called once as an application does: their default 2
  retries (the rule `aider` wraps above; the Anthropic SDK's `_calculate_retry_timeout` is the
  same). 3 requests at most.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["CLIENTS", "Reply", "aider", "claude_code", "codex", "opencode", "sdk"]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]  # lower-case names

    @property
    def ok(self) -> bool:
        return self.status < 400


Send = Callable[[], Reply]
Sleep = Callable[[float], None]


def _seconds(value: str | None) -> float | None:
    """A Retry-After value in seconds: a number, or an HTTP date."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else parsed.timestamp() - time.time()


def _header_wait(reply: Reply) -> float | None:
    """`retry-after-ms`, else Retry-After, in seconds (the SDKs' order)."""
    ms = reply.headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    return _seconds(reply.headers.get("retry-after"))


def _sdk_should_retry(reply: Reply) -> bool:
    """The OpenAI and Anthropic SDKs' rule: `x-should-retry` first, then the status."""
    said = reply.headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return reply.status in (408, 409, 429) or reply.status >= 500


def _retryable(reply: Reply) -> bool:
    return reply.status in (408, 409, 429) or reply.status >= 500


def codex(send: Send, sleep: Sleep, rng: random.Random) -> None:
    def backoff(attempt: int) -> float:
        return 0.2 * 2 ** (attempt - 1) * rng.uniform(0.9, 1.1)

    for turn in range(6):
        for attempt in range(5):
            reply = send()
            if reply.ok or not _retryable(reply):
                return
            if attempt < 4:
                wait = _seconds(reply.headers.get("retry-after"))
                sleep(backoff(attempt + 1) if wait is None else wait)
        if turn < 5:
            wait = _seconds(reply.headers.get("retry-after"))
            sleep(backoff(turn + 1) if wait is None else wait)


def _openai_sdk(send: Send, sleep: Sleep, rng: random.Random, max_retries: int = 2) -> Reply:
    """One SDK call: the OpenAI (and Anthropic) Python SDK's retries."""
    for retries in range(max_retries + 1):
        reply = send()
        if reply.ok or not _sdk_should_retry(reply) or retries == max_retries:
            return reply
        wait = _header_wait(reply)
        if wait is None or not 0 < wait <= 60:
            wait = min(0.5 * 2 ** retries, 8.0) * (1 - 0.25 * rng.random())
        sleep(wait)
    raise AssertionError("unreachable")


def aider(send: Send, sleep: Sleep, rng: random.Random) -> None:
    delay = 0.125
    while True:
        reply = _openai_sdk(send, sleep, rng)
        if reply.ok or not _retryable(reply):
            return
        delay *= 2
        if delay > 60:
            return
        sleep(delay)


def _ai_sdk(send: Send, sleep: Sleep, max_retries: int = 2) -> Reply:
    """One AI SDK call (`retryWithExponentialBackoffRespectingRetryHeaders`)."""
    backoff = 2.0
    for attempt in range(max_retries + 1):
        reply = send()
        if reply.ok or not _retryable(reply) or attempt == max_retries:
            return reply
        wait = _header_wait(reply)
        sleep(wait if wait is not None and 0 <= wait and (wait < 60 or wait < backoff) else backoff)
        backoff *= 2
    raise AssertionError("unreachable")


def opencode(send: Send, sleep: Sleep, rng: random.Random, attempts: int = 7) -> None:
    for attempt in range(1, attempts + 1):
        reply = _ai_sdk(send, sleep)
        if reply.ok or not _retryable(reply) or attempt == attempts:
            return
        wait = _header_wait(reply)
        sleep(2.0 * 2 ** (attempt - 1) if wait is None else wait)


def claude_code(send: Send, sleep: Sleep, rng: random.Random, max_retries: int = 10) -> None:
    for attempt in range(1, max_retries + 2):
        reply = send()
        if reply.ok or not _sdk_should_retry(reply) or attempt > max_retries:
            return
        after = reply.headers.get("retry-after")
        if after is not None and after.strip().lstrip("-").isdigit():  # parseInt
            sleep(max(0, int(after)))
            continue
        base = min(0.5 * 2 ** (attempt - 1), 32.0)
        sleep(base + rng.random() * 0.25 * base)


def sdk(send: Send, sleep: Sleep, rng: random.Random) -> None:
    _openai_sdk(send, sleep, rng)


# name -> (replay, the protocol it speaks to route, most requests it makes)
CLIENTS: dict[str, tuple[Callable[[Send, Sleep, random.Random], None], str, int]] = {
    "codex": (codex, "responses", 30),
    "aider": (aider, "chat", 27),
    "opencode": (opencode, "chat", 21),
    "claude-code": (claude_code, "messages", 11),
    "openai-sdk": (sdk, "chat", 3),
    "anthropic-sdk": (sdk, "messages", 3),
}
