"""Labels of one store from three sources: shadow judgements, feedback verdicts, consortium rankings.

A label says, for one prompt and one boundary, how good the lower tier's answer was (`local`)
and the upper tier's (`hosted`), in [0, 1]: the same records `route calibrate` reads.

- shadow: the judge compared both tiers' answers, in both orders (`verdict_label`);
- feedback: a user's verdict on an answer of the boundary's lower tier (router/store/feedback.py): good
  means that tier was enough, bad that the upper one was needed. A verdict on the upper tier's
  answer is left out: a good one says nothing about the lower tier, and keeping only the bad
  ones would teach that whatever the router sends up gains nothing (the routing itself would
  decide the labels);
- consortium: the arbiter ranked a lowest-tier member against a hosted one (boundary 0 only:
  the ranking says nothing about which hosted tier).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from router.config import Config
    from router.learning.store import LabelRow, VersionRow

__all__ = ["SOURCES", "LabelStore", "import_feedback", "verdict_label"]

SOURCES = ("shadow", "feedback", "consortium")


class LabelStore(Protocol):
    """What the learning package needs of a store: the local SQLite one (store.py) or Redis
    (fleet.py)."""

    def add_labels(self, labels: Sequence[tuple], ts: float | None = None) -> int: ...
    def labels(self, boundary: int) -> list[LabelRow]: ...
    def quarantine(self, givers: Iterable[str], reason: str = "") -> None: ...
    def quarantined(self) -> set[str]: ...
    def usable_counts(self, per_key: int) -> dict[int, int]: ...
    def label_counts(self) -> dict[int, dict[str, int]]: ...
    def add_spend(self, usd: float, calls: int, ts: float | None = None) -> None: ...
    def spend(self, day: str | None = None) -> tuple[float, int]: ...
    def versions(self) -> list[VersionRow]: ...
    def version(self, version: int) -> VersionRow | None: ...
    def current(self) -> tuple[int, bool]: ...
    def adopt(self, expected: int, boundary: int, weights: dict, seen: int, heads: dict[int, int],
              summary: dict) -> int | None: ...
    def claim_refit(self, boundary: int, labels: int, every: int) -> int: ...
    def set_current(self, version: int, *, pinned: bool) -> None: ...
    def note_refit(self, boundary: int, record: dict) -> None: ...
    def refits(self) -> dict[int, dict]: ...
    def changed(self) -> bool: ...
    def close(self) -> None: ...


def verdict_label(votes: Sequence[int | None]) -> tuple[float, float] | None:
    """(local, hosted) from the judge's votes, one per order it was asked in: +1 the lower tier's
    answer was better, -1 the upper's, 0 a tie, None no readable verdict. Averaging the orders
    cancels position bias: a judge that always prefers whichever answer it reads first votes
    +1 and -1, a tie. None when no order gave a verdict."""
    read = [v for v in votes if v is not None]
    if not read:
        return None
    lower_better = sum(read) / len(read)
    return (1.0 + lower_better) / 2.0, (1.0 - lower_better) / 2.0


def import_feedback(store: LabelStore, config: Config) -> int:
    """Copy feedback verdicts and consortium preferences from the request log (SQLite or
    PostgreSQL) into the store, per boundary (each once: they keep their feedback id as `ref`),
    each with the client key that gave it and whether it is trusted (router-made, the
    operator's, or an admin key's). Returns how many were new."""
    from router.learning.store import NewLabel
    from router.store.choice import open_log
    from router.store.feedback import is_trusted, labelled_records

    log = open_log(config, check=False)
    try:
        tiers = config.routing.tiers
        rows: list[NewLabel] = []
        for b in range(len(tiers) - 1):
            for r in labelled_records(log, tiers[b].backends, hosted_backends=()):
                source = "consortium" if r["source"] == "consortium" else "feedback"
                if source == "consortium" and b > 0:
                    continue
                giver = r.get("giver")
                rows.append(NewLabel(b, source, f"{b}:{r['id']}", r["prompt"], r["local"], r["hosted"], giver,
                                     source == "consortium" or is_trusted(config, giver)))
    finally:
        log.close()
    return store.add_labels(rows) if rows else 0
