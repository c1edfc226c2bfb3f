"""The streamer transformers calls inside DiffusionGemma's generation loop, for a batch of jobs.

`generate()` calls `put(prompt)` once, then after every denoising step `put_draft(canvas argmax)`
and after every finished canvas `put(canvas)`, each with one row per sequence in the batch.
This streamer hands each row's drafts and committed text to its own job, drops rows whose job
was cancelled or ran past its deadline (they keep a seat in the batch until it ends: a row
cannot leave a running `generate()`), and raises `StopGeneration` once every row is dropped,
which is the one way to leave transformers' loop between steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchStreamer", "DraftEvent", "Row", "StopGeneration", "visible_ids"]


class StopGeneration(Exception):
    """Raised from the streamer to leave transformers' generation loop between steps."""


@dataclass(frozen=True)
class DraftEvent:
    """The argmax of one denoising step for the canvas being written (committed text excluded)."""

    text: str
    step: int  # 1-based, within this canvas
    canvas: int  # 0-based


def visible_ids(ids: Sequence[int], hidden: frozenset[int]) -> list[int]:
    """`ids` without the special tokens in `hidden`. Decoding with `skip_special_tokens=True` would
    also drop the thinking delimiters (`<|channel>`, `<channel|>`), which the answer splitter needs."""
    return [t for t in ids if t not in hidden]


@dataclass
class Row:
    """One job's view of a batched generation."""

    job: Any  # EngineJob (not imported: the engine imports this module)
    tokens: list[int] = field(default_factory=list)  # committed, specials that hide removed
    text: str = ""  # decoded committed text, already emitted
    canvases: int = 0
    steps: int = 0  # batched decoder passes this row took part in
    canvas_steps: int = 0
    finished: bool = False  # an EOS was committed
    dropped: str = ""  # why the row stopped listening (cancelled, deadline), "" while live


class BatchStreamer:
    """Routes each batch row's drafts and committed text to its job (duck-types transformers'
    `BaseStreamer` + `put_draft`, which is all `generate()` looks for)."""

    def __init__(self, tokenizer: Any, jobs: Sequence[Any], eos_ids: set[int], hidden: frozenset[int],
                 on_drop: Callable[[Row], None]):
        self.tokenizer = tokenizer
        self.rows = [Row(job) for job in jobs]
        self.eos_ids = eos_ids
        self.hidden = hidden
        self.on_drop = on_drop  # called once per dropped row, on the worker thread
        self.canvas_s: list[float] = []  # wall seconds per committed canvas (shared by the batch)
        self._prompt_seen = False
        self._canvas_started = time.perf_counter()
        self._takes_logits = False

    # -- what generate() calls -------------------------------------------------------------

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # the first call carries the (padded) prompts
            self._prompt_seen = True
            self._canvas_started = time.perf_counter()
            return
        now = time.perf_counter()
        self.canvas_s.append(now - self._canvas_started)
        self._canvas_started = now
        for row, ids in zip(self.rows, value.tolist(), strict=True):
            self._commit(row, ids)
        self.check()

    def put_draft(self, value: Any, **_kwargs: Any) -> None:
        for row, ids in zip(self.rows, value.tolist(), strict=True):
            if row.dropped or row.finished:
                continue
            row.steps += 1
            row.canvas_steps += 1
            if row.job.drafts:
                text = self._decode(self._until_eos(ids))
                row.job.emit(("draft", DraftEvent(text, row.canvas_steps, row.canvases)))
        self.check()

    def end(self) -> None:
        """Nothing to flush: committed text is emitted canvas by canvas."""

    # -- helpers ---------------------------------------------------------------------------

    def live(self) -> list[Row]:
        return [row for row in self.rows if not row.dropped]

    def check(self) -> None:
        """Drop rows whose job was cancelled or is past its deadline; stop when none is left."""
        now = time.monotonic()
        for row in self.live():
            job = row.job
            if not job.cancelled.is_set() and job.deadline is not None and now > job.deadline:
                job.cancel("deadline")
            if job.cancelled.is_set():
                row.dropped = job.cancel_reason
                self.on_drop(row)
        if not self.live():
            raise StopGeneration("every request in the batch was cancelled")

    def _commit(self, row: Row, ids: list[int]) -> None:
        if row.dropped or row.finished:
            return
        kept = self._until_eos(ids)
        row.finished = len(kept) < len(ids)  # the cut is at an EOS
        row.tokens.extend(visible_ids(kept, self.hidden))
        row.canvases += 1
        row.canvas_steps = 0
        # Decode everything so far and emit the new suffix: a canvas boundary may split a word.
        text = self._decode(row.tokens)
        piece, row.text = text[len(row.text):], text
        if piece:
            row.job.emit(("text", piece))

    def _until_eos(self, ids: list[int]) -> list[int]:
        cut = next((i for i, t in enumerate(ids) if t in self.eos_ids), len(ids))
        return ids[:cut]

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(visible_ids(ids, self.hidden), skip_special_tokens=False))
