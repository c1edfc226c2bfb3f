"""The learning store of a replica fleet (`state: backend: redis`): labels, versions, the version
in use and the shadow spend, in the Redis every replica names, so that every replica learns
from the fleet's labels, the budget is the fleet's, and the fleet uses one version.

Keys (under `state.prefix`): `learn:labels:<boundary>` a list of JSON labels, `learn:refs` the
refs already stored, `learn:versions` a hash of JSON versions, `learn:current` and
`learn:pinned`, `learn:spend:<UTC day>` a hash of dollars and calls, `learn:last:<boundary>` what
a boundary's last refit found, and counters for ids.
Learning calls run off the event loop (the learner hands them to a thread), so the client is
redis-py's synchronous one. Unlike latency, what is learned here is worth keeping: give Redis
persistence, or a fresh Redis starts again from the configured weights.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from router.learning.store import LabelRow, NewLabel, VersionRow, utc_day

if TYPE_CHECKING:
    from redis import Redis

    from router.config import StateConfig

__all__ = ["RedisLearningStore"]

_SPEND_TTL_S = 8 * 86400  # a day's spend is kept a week, for `route learn status`


class RedisLearningStore:
    def __init__(self, client: Redis, prefix: str = "route:"):
        self.client = client
        self.prefix = prefix
        self.watch_s = 1.0  # how often `changed`'s thread reads the fleet's version (the learner sets it)
        self._watcher: threading.Thread | None = None
        self._closing = threading.Event()
        self._polled: tuple[int, bool] | None = None  # the version in use, as the thread last read it
        self._checked: tuple[int, bool] | None = None  # ... as `changed` last reported it

    @classmethod
    def from_config(cls, state: StateConfig) -> RedisLearningStore:
        from redis import Redis

        from backends.secrets import expand

        assert state.url is not None  # the config's validator requires it for backend: redis
        timeout = max(1.0, state.timeout_ms / 1000)
        return cls(Redis.from_url(expand(state.url), socket_timeout=timeout, socket_connect_timeout=timeout),
                   state.prefix)

    def _key(self, *parts: object) -> str:
        return self.prefix + "learn:" + ":".join(map(str, parts))

    # -- labels ---------------------------------------------------------------------------

    def add_labels(self, labels: Iterable[tuple], ts: float | None = None) -> int:
        now = time.time() if ts is None else ts
        added = 0
        for label in labels:
            n = NewLabel(*label)
            if not self.client.sadd(self._key("refs"), n.ref):
                continue
            label_id = int(self.client.incr(self._key("label_id")))
            row = {"id": label_id, "ts": now, "boundary": n.boundary, "source": n.source, "ref": n.ref,
                   "prompt": n.prompt, "local": float(n.local), "hosted": float(n.hosted), "giver": n.giver,
                   "trusted": bool(n.trusted)}  # fmt: skip
            self.client.rpush(self._key("labels", n.boundary), json.dumps(row))
            added += 1
        return added

    def usable_counts(self, per_key: int) -> dict[int, int]:
        from router.learning.learner import usable

        quarantined = self.quarantined()
        out: dict[int, int] = {}
        for key in self.client.scan_iter(self._key("labels", "*")):
            boundary = int(key.decode().rsplit(":", 1)[1])
            out[boundary] = len(usable(self.labels(boundary), quarantined, per_key))
        return out

    def quarantine(self, givers: Iterable[str], reason: str = "") -> None:
        givers = list(givers)
        if givers:
            self.client.sadd(self._key("quarantine"), *givers)

    def quarantined(self) -> set[str]:
        return {g.decode() if isinstance(g, bytes) else g for g in self.client.smembers(self._key("quarantine"))}

    def labels(self, boundary: int) -> list[LabelRow]:
        return [LabelRow(**json.loads(raw)) for raw in self.client.lrange(self._key("labels", boundary), 0, -1)]

    def label_counts(self) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for key in self.client.scan_iter(self._key("labels", "*")):
            boundary = int(key.decode().rsplit(":", 1)[1])
            for raw in self.client.lrange(key, 0, -1):
                source = json.loads(raw)["source"]
                out.setdefault(boundary, {})[source] = out.get(boundary, {}).get(source, 0) + 1
        return out

    # -- spend ----------------------------------------------------------------------------

    def add_spend(self, usd: float, calls: int, ts: float | None = None) -> None:
        day = utc_day(ts)
        pipe = self.client.pipeline()
        for key in (self._key("spend", day), self._key("spend", "total")):
            pipe.hincrbyfloat(key, "usd", float(usd))
            pipe.hincrby(key, "calls", int(calls))
        pipe.expire(self._key("spend", day), _SPEND_TTL_S)
        pipe.execute()

    def spend(self, day: str | None = None) -> tuple[float, int]:
        found = self.client.hgetall(self._key("spend", "total" if day == "*" else day or utc_day()))
        return float(found.get(b"usd", 0.0)), int(found.get(b"calls", 0))

    # -- versions -------------------------------------------------------------------------

    def versions(self) -> list[VersionRow]:
        rows = [_version(json.loads(raw)) for raw in self.client.hvals(self._key("versions"))]
        return sorted(rows, key=lambda v: v.id)

    def version(self, version: int) -> VersionRow | None:
        raw = self.client.hget(self._key("versions"), str(version))
        return None if raw is None else _version(json.loads(raw))

    def current(self) -> tuple[int, bool]:
        current, pinned = self.client.mget(self._key("current"), self._key("pinned"))
        return int(current or 0), pinned == b"1"

    def adopt(self, expected: int, boundary: int, weights: dict[str, Any], seen: int, heads: dict[int, int],
              summary: dict[str, Any]) -> int | None:
        """Record a version and make it current if the fleet's is still `expected` (WATCH: a
        replica that adopted or rolled back first wins)."""
        from redis.exceptions import WatchError

        with self.client.pipeline() as pipe:
            try:
                pipe.watch(self._key("current"), self._key("pinned"))
                current, pinned = pipe.mget(self._key("current"), self._key("pinned"))
                if int(current or 0) != expected or pinned == b"1":
                    return None
                version = int(self.client.incr(self._key("version_id")))
                row = {"id": version, "ts": time.time(), "parent": expected, "boundary": boundary, "weights": weights,
                       "seen": seen, "heads": {str(b): v for b, v in {**heads, boundary: version}.items()},
                       "summary": summary}  # fmt: skip
                pipe.multi()
                pipe.hset(self._key("versions"), str(version), json.dumps(row))
                pipe.set(self._key("current"), version)
                pipe.set(self._key("refits", boundary), 0)
                pipe.execute()
            except WatchError:
                return None
        return version

    def claim_refit(self, boundary: int, labels: int, every: int) -> int:
        """As the local store's: which refit since the boundary's last adoption this is, when
        it is due and this replica claimed it; else 0."""
        from redis.exceptions import WatchError

        key, count = self._key("refit", boundary), self._key("refits", boundary)
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(key, count)
                last, attempts = pipe.mget(key, count)
                if labels - int(last or 0) < every:
                    return 0
                attempt = int(attempts or 0) + 1
                pipe.multi()
                pipe.mset({key: labels, count: attempt})
                pipe.execute()
            except WatchError:
                return 0
        return attempt

    def set_current(self, version: int, *, pinned: bool) -> None:
        self.client.mset({self._key("current"): version, self._key("pinned"): "1" if pinned else "0"})

    def note_refit(self, boundary: int, record: dict[str, Any]) -> None:
        self.client.set(self._key("last", boundary), json.dumps(record))

    def refits(self) -> dict[int, dict[str, Any]]:
        out = {}
        for key in self.client.scan_iter(self._key("last", "*")):
            raw = self.client.get(key)
            if raw is not None:
                out[int(key.decode().rsplit(":", 1)[1])] = json.loads(raw)
        return out

    def changed(self) -> bool:
        """Whether the fleet's version in use changed since the last call. A replica cannot see it
        without a round trip, which a decision must not wait for: a daemon thread reads it every
        `watch_s` (whether requests arrive or not) and this reads what it last saw."""
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="route-learn-watch", daemon=True)
            self._watcher.start()
        polled = self._polled
        if polled is None or polled == self._checked:
            return False
        self._checked = polled
        return True

    def _watch(self) -> None:
        while not self._closing.wait(self.watch_s):
            try:
                self._polled = self.current()
            except Exception:  # Redis away: the next poll tries again; routing keeps its version
                continue

    def close(self) -> None:
        self._closing.set()
        self.client.close()


def _version(row: dict[str, Any]) -> VersionRow:
    return VersionRow(
        id=int(row["id"]), ts=float(row["ts"]), parent=int(row["parent"]), boundary=int(row["boundary"]),
        weights=row["weights"], seen=int(row["seen"]), heads={int(b): int(v) for b, v in row["heads"].items()},
        summary=row["summary"],
    )  # fmt: skip
