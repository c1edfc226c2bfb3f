"""Route the task, not the turn: what one call of a session says about the task, and the tier the
session moves to. Pure: messages and the session's state in, a verdict out.

A session's calls are of two kinds. A *continuation* answers the model's own tool calls (the
messages after the last assistant turn that called tools are tool results, and perhaps a short
note the agent adds): it asks nothing new of the model, so it is never scored. A *new turn* is
a user turn of its own: it is scored alone -- its text, not the transcript around it, so that a
long history cannot carry an easy task across a boundary -- and the session's tier becomes the
higher of the two. So a tier only moves up: a short follow-up ("ok, continue") never moves a
hard task down.

Failure signals move a session up one tier too, and it stays there: tool calls failing again
and again, a refusal, or the client sending the very same turn again after it was answered
(a user who did not like the answer; never a retry after an error, which is not counted).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.types import Message, content_text

__all__ = ["ERRORS_TO_ESCALATE", "Escalation", "Turn", "escalation", "read_turn"]

ERRORS_TO_ESCALATE = 2  # failed tool results in a row that say the model is not managing the task
_ERROR_PREFIXES = ("error", "traceback", "exception", "fatal", "failed")


@dataclass(frozen=True, slots=True)
class Turn:
    """What the latest call asks. `text`: the new user turn's own text ("" for a continuation);
    `first`: the conversation's first user turn (the task, for a session the router has not
    seen yet); `tool_errors`: the failed tool results this call answers with; `refusal`: the
    model's previous answer was a refusal."""

    continuation: bool
    text: str
    first: str
    tool_errors: int = 0
    refusal: bool = False


def _is_error(message: Message) -> bool:
    text = content_text(message.get("content")).lstrip().lower()
    return text.startswith(_ERROR_PREFIXES)


def read_turn(messages: list[Message]) -> Turn:
    """The latest call of a conversation, read."""
    users = [m for m in messages if m.get("role") == "user"]
    first = content_text(users[0].get("content")) if users else ""
    last_call = max((i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("tool_calls")),
                    default=-1)
    after = messages[last_call + 1:] if last_call >= 0 else []
    results = [m for m in after if m.get("role") == "tool"]
    previous = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    refusal = previous is not None and bool(previous.get("refusal"))
    if results and all(m.get("role") in ("tool", "user", "system") for m in after):
        return Turn(True, "", first, sum(_is_error(m) for m in results), refusal)
    text = content_text(users[-1].get("content")) if users else ""
    return Turn(False, text, first, 0, refusal)


@dataclass(frozen=True, slots=True)
class Escalation:
    """One step up, and why."""

    tier: int
    why: str


def escalation(tier: int, top: int, turn: Turn, *, errors_in_a_row: int, repeated: bool) -> Escalation | None:
    """One tier up from `tier` (at most `top`) when a failure signal says so, else None.
    `errors_in_a_row`: failed tool results counted so far, this call's included; `repeated`:
    the client sent the same turn again after it was answered."""
    if tier >= top:
        return None
    if errors_in_a_row >= ERRORS_TO_ESCALATE:
        return Escalation(tier + 1, f"{errors_in_a_row} failed tool results in a row")
    if turn.refusal:
        return Escalation(tier + 1, "the model refused the last turn")
    if repeated:
        return Escalation(tier + 1, "the same turn was sent again after it was answered")
    return None
