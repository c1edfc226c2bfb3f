"""What was learned, from which labels, at what cost: `route learn status`, `history` and
`rollback` as plain data, read from the store a config points at (no Router needed).

`status` is also what the web view shows. Each boundary's "estimated APGR" is measured now,
on the labels of that boundary its weights were not fitted on, with a bootstrap standard error.
Labels are counted as a refit reads them (`usable`: at most `max_labels_per_key` of each
non-admin key's, none of a quarantined key's), so a key flooding verdicts does not move the
figure the operator reads; `stored` says how many are kept in all. Each boundary's last refit
says whether it was kept, adopted or waits for `adopt`, why, and the traffic it moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from backends.errors import UsageError
from router.learning.config import boundary_name, boundary_scorer, default_judge
from router.learning.labels import SOURCES
from router.learning.store import utc_day

if TYPE_CHECKING:
    from policies.complexity import Weights
    from router.config import Config
    from router.learning.labels import LabelStore

__all__ = ["adopt", "configured_weights", "history", "resume", "rollback", "spend", "status"]


def _store(config: Config) -> LabelStore:
    from router.learning import open_store

    return open_store(config)


def configured_weights(config: Config, boundary: int) -> Weights:
    from policies.complexity import ComplexityScorer
    from policies.scoring import build_scorer

    spec, where = boundary_scorer(config, boundary)
    scorer = build_scorer(spec.kind, **spec.options)
    if not isinstance(scorer, ComplexityScorer):
        raise UsageError(f"{'.'.join(map(str, where))} is `kind: {spec.kind}`, which has no weights to learn.")
    return scorer.weights


def status(config: Config) -> dict[str, Any]:
    """Labels by source, the version in use and each boundary's estimated APGR, the spend."""
    from router.config import LearnConfig

    learn = config.routing.learn
    per_key = learn.max_labels_per_key if learn is not None else LearnConfig().max_labels_per_key
    store = _store(config)
    try:
        current, pinned = store.current()
        row = store.version(current) if current else None
        quarantine = store.quarantined()
        stored = store.label_counts()
        counts = _usable_counts(config, store, quarantine, per_key)
        boundaries = _boundaries(config, store, row.heads if row is not None else {}, counts, store.refits())
        today, total = store.spend(), store.spend("*")
        quarantined = sorted(store.quarantined())
    finally:
        store.close()
    return {
        **_settings(config),
        "version": current,
        "pinned": pinned,
        "labels": _labels(counts, stored),
        "boundaries": boundaries,
        "spend": _spend_summary(learn.budget_usd_per_day if learn is not None else 0.0, today, total),
        "store": "redis" if config.state.backend == "redis" else "local",
        "quarantined": quarantined,
    }  # fmt: skip


def _boundary_indexes(config: Config) -> range:
    return range(len(config.routing.tiers) - 1)


def _usable_counts(config: Config, store: LabelStore, quarantine: set[str],
                   per_key: int) -> dict[int, dict[str, int]]:
    """Per boundary, its labels by source as a refit reads them (`usable`)."""
    from router.learning.learner import usable

    return {b: dict(Counter(r.source for r in usable(store.labels(b), quarantine, per_key)))
            for b in _boundary_indexes(config)}


def _boundaries(config: Config, store: LabelStore, heads: Mapping[int, int], counts: dict[int, dict[str, int]],
                refits: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [_boundary(config, store, b, heads.get(b, 0), counts, refits.get(b)) for b in _boundary_indexes(config)]


def _labels(counts: dict[int, dict[str, int]], stored: dict[Any, dict[Any, int]]) -> dict[str, Any]:
    by_source = {s: sum(c.get(s, 0) for c in counts.values()) for s in SOURCES}
    return {"total": sum(by_source.values()), "by_source": by_source,
            "stored": sum(n for c in stored.values() for n in c.values())}


def _spend_summary(budget: float, today: tuple[float, int], total: tuple[float, int]) -> dict[str, Any]:
    (today_usd, today_calls), (total_usd, total_calls) = today, total
    return {"day": utc_day(), "today_usd": round(today_usd, 6), "today_calls": today_calls,
            "budget_usd_per_day": budget, "left_usd": round(max(0.0, budget - today_usd), 6),
            "total_usd": round(total_usd, 6), "total_calls": total_calls}


def _settings(config: Config) -> dict[str, Any]:
    learn = config.routing.learn
    if learn is None:
        return {"enabled": False, "auto": False, "shadow_rate": 0.0, "judge": None}
    return {"enabled": True, "auto": learn.auto, "shadow_rate": learn.shadow_rate,
            "judge": learn.judge or default_judge(config)}


def _boundary(config: Config, store: LabelStore, b: int, version: int, counts: dict[int, dict[str, int]],
              refit: dict[str, Any] | None) -> dict[str, Any]:
    """One boundary's version, labels, and APGR now on the labels its weights were not fitted on."""
    from policies.complexity import Weights
    from policies.complexity.training.adapt import estimate
    from router.learning.learner import MAX_LABELS

    row = store.version(version) if version else None
    if row is None:
        weights, seen, adopted = configured_weights(config, b), 0, None
    else:
        weights, seen = Weights.from_json(row.weights), row.seen
        adopted = {k: row.summary.get(k) for k in ("apgr_before", "apgr_after", "gain", "labels")}
    unseen = [r.record() for r in store.labels(b)[-MAX_LABELS:] if r.id > seen]
    found = estimate(weights, unseen)
    return {"boundary": boundary_name(config, b), "index": b, "version": version,
            "labels": {s: counts.get(b, {}).get(s, 0) for s in SOURCES},
            "apgr": None if found is None else found.as_dict(), "judged_on": len(unseen), "adopted_with": adopted,
            "last_refit": _refit(refit)}


def _refit(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A boundary's last refit as the operator reads it: what happened and why, its figures,
    the labels it read and the traffic it moves (the pending weights left out)."""
    if record is None:
        return None
    from router.learning.moves import describe

    keep = ("ts", "outcome", "reason", "version", "labels_used", "sources", "gain", "placement", "shift",
            "apgr_before", "apgr_after", "moved", "refit", "z")
    kept = record.get("outcome") == "kept"
    return {**{k: record.get(k) for k in keep},
            "moves": "none: the version in use stays" if kept else describe(record.get("moved"))}


def spend(config: Config) -> dict[str, Any] | None:
    """What shadow judging spent (today, UTC, and all days) against its budget, for `route
    stats`; None when the config does not learn."""
    learn = config.routing.learn
    if learn is None:
        return None
    store = _store(config)
    try:
        today_usd, today_calls = store.spend()
        total_usd, total_calls = store.spend("*")
    finally:
        store.close()
    return {"day": utc_day(), "today_usd": round(today_usd, 6), "today_calls": today_calls,
            "budget_usd_per_day": learn.budget_usd_per_day, "total_usd": round(total_usd, 6),
            "total_calls": total_calls}  # fmt: skip


def history(config: Config) -> dict[str, Any]:
    """Every adopted version, oldest first, and which one is in use."""
    store = _store(config)
    try:
        current, pinned = store.current()
        versions = [v.as_dict() for v in store.versions()]
    finally:
        store.close()
    return {"version": current, "pinned": pinned, "versions": versions}


def rollback(config: Config, version: int | None = None, *, quarantine: Collection[str] = ()) -> dict[str, Any]:
    """Use `version` (default: the one before the version in use; 0: the configured weights)
    and pin it: refits keep running but adopt nothing until `resume`. `quarantine`: client keys
    whose labels no refit reads again (so `resume` does not relearn what they taught)."""
    store = _store(config)
    try:
        current, _ = store.current()
        if version is None:
            row = store.version(current) if current else None
            version = row.parent if row is not None else 0
        if version < 0 or (version and store.version(version) is None):
            known = ", ".join(str(v.id) for v in store.versions()) or "none yet"
            raise UsageError(f"there is no version {version}. Versions: 0 (the configured weights), {known}; "
                             "`route learn history` lists them.")
        if quarantine:
            store.quarantine(quarantine, reason=f"rollback to version {version}")
        store.set_current(version, pinned=True)
        quarantined = sorted(store.quarantined())
    finally:
        store.close()
    return {"version": version, "previous": current, "pinned": True, "quarantined": quarantined}


def adopt(config: Config, boundary: int | None = None) -> dict[str, Any]:
    """Adopt the version a refit left waiting (`routing.learn.max_moved`), for `boundary` or the
    one boundary that has one."""
    store = _store(config)
    try:
        waiting = _waiting_refits(store)
        boundary = _chosen_boundary(waiting, boundary)
        record = waiting[boundary]
        current = _version_made_against(store, record["pending"])
        version = _adopt_pending(store, current, boundary, record)
        done = {k: v for k, v in record.items() if k != "pending"}
        store.note_refit(boundary, {**done, "outcome": "adopted", "version": version, "confirmed": True})
    finally:
        store.close()
    return {"version": version, "previous": current, "boundary": boundary, "moved": record.get("moved")}


def _waiting_refits(store: LabelStore) -> dict[int, dict[str, Any]]:
    return {b: r for b, r in store.refits().items() if r.get("outcome") == "waiting" and r.get("pending")}


def _chosen_boundary(waiting: dict[int, dict[str, Any]], boundary: int | None) -> int:
    """`boundary` when a refit of it waits; with none named, the one boundary whose refit waits."""
    if boundary is not None and boundary not in waiting or not waiting:
        raise UsageError("no refit is waiting to be adopted" + (f" for boundary {boundary}" if boundary is not None
                         else "") + "; `route learn status` shows what each boundary's last refit found.")
    if boundary is None:
        if len(waiting) > 1:
            raise UsageError(f"refits of boundaries {', '.join(map(str, sorted(waiting)))} are waiting: name one "
                             "with --boundary.")
        boundary = next(iter(waiting))
    return boundary


def _version_made_against(store: LabelStore, pending: dict[str, Any]) -> int:
    """The version in use, when it is the one the waiting refit was made against (and not pinned)."""
    current, pinned = store.current()
    if pinned or current != pending["parent"]:
        raise UsageError(f"the version in use is {current}{' (pinned by a rollback)' if pinned else ''}, not "
                         f"{pending['parent']}, which this refit was made against: `route learn resume`, or let the "
                         "next refit propose again.")
    return current


def _adopt_pending(store: LabelStore, current: int, boundary: int, record: dict[str, Any]) -> int:
    """The new version holding the waiting weights, its summary confirmed by the operator."""
    pending = record["pending"]
    row = store.version(current) if current else None
    heads = dict(row.heads) if row is not None else {}
    summary = {k: v for k, v in record.items() if k not in ("pending", "outcome", "ts", "boundary")}
    version = store.adopt(current, boundary, pending["weights"], pending["seen"], heads, {**summary,
                          "confirmed": True})
    if version is None:
        raise UsageError("another process adopted or rolled back meanwhile; `route learn status` shows the version "
                         "in use.")
    return version


def resume(config: Config) -> dict[str, Any]:
    """Let refits adopt new versions again after a rollback."""
    store = _store(config)
    try:
        current, _ = store.current()
        store.set_current(current, pinned=False)
    finally:
        store.close()
    return {"version": current, "pinned": False}
