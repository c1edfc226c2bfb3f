"""Stream the synthesized answer out of the arbiter's reply while the reply is still arriving.

The arbiter writes `<answer-NONCE>...</answer-NONCE>` last, after its ranking and confidence,
so by the time the answer opens we know whether this round is the final one; only then is its
text passed on. What is passed on is exactly what the parser will later read as the answer
(surrounding whitespace trimmed, a closing tag split across chunks held back), so the streamed
chunks always add up to the final text.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["AnswerStream"]


class AnswerStream:
    """Feed it reply text; it calls `emit` with new answer text once `is_final(prefix)` said yes.
    `prefix` is the reply before the answer tag (it holds the confidence)."""

    def __init__(self, nonce: str, is_final: Callable[[str], bool], emit: Callable[[str], None]):
        self._open = f"<answer-{nonce}>"
        self._close = f"</answer-{nonce}>"
        self._is_final = is_final
        self._emit = emit
        self._reply = ""
        self._start: int | None = None  # index in the reply where the answer's content begins
        self.active = False  # the answer is being passed on
        self.closed = False
        self.text = ""  # what was passed on so far

    def feed(self, piece: str) -> None:
        if self.closed:
            return
        self._reply += piece
        if self._start is None:
            at = self._reply.find(self._open)
            if at < 0:
                return
            self._start = at + len(self._open)
            self.active = self._is_final(self._reply[:at])
        if not self.active:
            return
        body = self._reply[self._start:]
        end = body.find(self._close)
        if end >= 0:
            body, self.closed = body[:end], True
        else:
            body = body[:len(body) - _partial_tag(body, self._close)]
        # Trailing whitespace waits for more text: the parser trims it at the end of the answer.
        visible = body.strip()
        if len(visible) > len(self.text):
            new, self.text = visible[len(self.text):], visible
            self._emit(new)


def _partial_tag(text: str, tag: str) -> int:
    """Length of the longest end of `text` that could be the start of `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
