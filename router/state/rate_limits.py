"""The rate limiter: `rpm` / `tpm` per backend and per `route serve` API key, as token buckets
(policies/rate_limit.py).

`RateLimiter` keeps the buckets in this process (`state: backend: local`): exact for one
process. `RedisRateLimiter` keeps them in Redis, so every replica naming the same Redis and
prefix draws from one bucket: one Lua script refills and takes atomically (both limits of a
backend, or neither) and answers allowed or how long to wait. A bucket's keys expire once it
would have refilled to full, which is the same as no key at all, so idle buckets vanish.

While Redis is unreachable each replica falls back to its own buckets, starting from the level
it last saw in Redis (full, for one it never took from): the limit then holds per replica, so N
replicas may send up to N times the limit until Redis answers again. What was taken during the
outage is not replayed into Redis afterwards. A Redis that comes back empty (restarted, flushed)
does not start the fleet's buckets full: the first replica to ask seeds each one with its own
level (router/state/rate_limits.py `_TAKE`).

Every use is by (kind, name): kind `backend` (config `backends.<name>.rpm/tpm`) or `key`
(config `server.keys.<name>.rpm/tpm`). Three operations:

    peek(name, tokens)    no I/O: would this request be refused? (the routing decision's view;
                          for Redis, as of the last reply, so it may be stale -- `take` decides)
    take(name, tokens)    admit one request of `tokens` estimated tokens, or say why not
    settle(name, charged, used)
                          correct tpm with the real usage once the answer is in
    refresh()             read every bucket's level (Redis): a process that just started, such
                          as `route --explain`, sees what others used
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from backends.types import Message
from policies.rate_limit import Buckets, Limited, RateLimits, request_cost

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

    from router.config import Config
    from router.state.redis_link import RedisLink

__all__ = ["Kind", "RateLimiter", "RedisRateLimiter", "estimate_tokens", "limits_from_config", "rate_limiter_for"]

Kind = Literal["backend", "key"]
Clock = Callable[[], float]

# Refill, then take from every bucket or from none. Mirrors policies/rate_limit.py exactly.
# KEYS: one hash {level, at} per limited dimension (rpm, then tpm).
# ARGV: now in seconds ("" = this Redis server's clock, one clock for every replica); "1" to
# charge whether it fits or not (a correction, which may leave a debt); then limit, cost and seed
# per key. The seed is the level this replica last saw, refilled to now: a key that is missing
# although the replica's own bucket is not full was lost with Redis (a restart, a flush), and
# starts again where the replica knew it to be, not full. (An idle key expires only once it
# would be full, which the seed is by then too.)
# Returns {1 allowed | 0 refused, seconds to wait, index of the limit that refused, levels...}.
_TAKE = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local force = ARGV[2] == '1'
local levels, ats = {}, {}
local wait, which = 0, 0
for i, key in ipairs(KEYS) do
  local limit, cost = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  local seed = math.min(limit, tonumber(ARGV[3 * i + 2]) or limit)
  local state = redis.call('HMGET', key, 'level', 'at')
  local level, at = tonumber(state[1]) or seed, tonumber(state[2]) or now
  if now > at then
    level = math.min(limit, level + (now - at) * limit / 60)
    at = now
  end
  levels[i], ats[i] = level, at
  if not force then
    local w = (math.min(cost, limit) - level) * 60 / limit
    if w > 1e-9 and w > wait then wait, which = w, i end
  end
end
if wait == 0 then
  for i, key in ipairs(KEYS) do
    local limit, cost = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
    if not force then cost = math.min(cost, limit) end
    levels[i] = math.min(limit, levels[i] - cost)
    redis.call('HSET', key, 'level', tostring(levels[i]), 'at', tostring(ats[i]))
    redis.call('PEXPIRE', key, math.ceil((limit - levels[i]) * 60000 / limit) + 1000)
  end
end
local out = {wait == 0 and 1 or 0, tostring(wait), which}
for i = 1, #levels do out[#out + 1] = tostring(levels[i]) end
return out
"""


def estimate_tokens(messages: list[Message], max_tokens: int | None) -> int:
    """What a request is charged to tpm at admission: its input at ~4 characters a token (the
    router's cost estimate uses the same) plus `max_tokens`."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return request_cost(chars // 4, max_tokens)


def limits_from_config(config: Config) -> dict[tuple[Kind, str], RateLimits]:
    """Every configured limit: backends' and `route serve` keys'."""
    found: dict[tuple[Kind, str], RateLimits] = {}
    for name, spec in config.backends.items():
        found[("backend", name)] = RateLimits(spec.rpm, spec.tpm)
    for name, key in config.server.keys.items():
        found[("key", name)] = RateLimits(key.rpm, key.tpm)
    return {k: v for k, v in found.items() if v}


class RateLimiter:
    """Buckets in this process. `clock` (seconds, monotonic) may be swapped by tests."""

    link: RedisLink | None = None
    # Whether `refresh` does anything (a kind that overrides it does): read by the Router before
    # every decision, which calls nothing for buckets kept here.
    refreshes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.refreshes = cls.refresh is not RateLimiter.refresh

    def __init__(self, limits: Mapping[tuple[Kind, str], RateLimits], *, clock: Clock | None = None):
        self.limits = {k: v for k, v in limits.items() if v}
        self.clock = clock
        self._buckets: dict[tuple[Kind, str], Buckets] = {}

    def _now(self) -> float:
        return (self.clock or time.monotonic)()

    def __bool__(self) -> bool:
        return bool(self.limits)

    def limits_of(self, name: str, kind: Kind = "backend") -> RateLimits | None:
        return self.limits.get((kind, name))

    def _bucket(self, kind: Kind, name: str) -> Buckets | None:
        key = (kind, name)
        buckets = self._buckets.get(key)
        if buckets is None and key in self.limits:
            buckets = self._buckets[key] = Buckets(self.limits[key], self._now())
        return buckets

    def levels(self, name: str, kind: Kind = "backend") -> dict[str, tuple[float, float]]:
        """Each limited dimension's (what is left now, limit), e.g. {"rpm": (41.5, 60)}: for
        the web view. With Redis, as of its last reply (plus the refill since); {} if unlimited."""
        buckets = self._bucket(kind, name)
        if buckets is None:
            return {}
        now = self._now()
        return {dim: (bucket.level_at(now), bucket.limit)
                for dim, bucket in (("rpm", buckets.rpm), ("tpm", buckets.tpm)) if bucket is not None}

    def peek(self, name: str, tokens: int, kind: Kind = "backend") -> Limited | None:
        buckets = self._bucket(kind, name)
        return None if buckets is None else buckets.peek(tokens, self._now())

    async def take(self, name: str, tokens: int, kind: Kind = "backend") -> Limited | None:
        """None: admitted (charged 1 request and `tokens` tokens); else the refusal."""
        return self._take_here(kind, name, tokens)

    def _take_here(self, kind: Kind, name: str, tokens: int) -> Limited | None:
        buckets = self._bucket(kind, name)
        return None if buckets is None else buckets.take(tokens, self._now())

    async def settle(self, name: str, charged: int, used: int, kind: Kind = "backend") -> None:
        """A request admitted with `charged` tokens used `used`: tpm owes (or gets back) the difference."""
        buckets = self._bucket(kind, name)
        if buckets is not None:
            buckets.settle(charged, used, self._now())

    async def refresh(self) -> None:
        """Bring the buckets `peek` reads up to date (here they always are)."""


class RedisRateLimiter(RateLimiter):
    """Buckets in Redis, shared by every replica; this process's buckets mirror the last levels
    Redis reported (for `peek`) and take over while Redis is unreachable. With `clock` set, its
    time goes to Redis instead of the server's own (tests freeze it so nothing refills)."""

    def __init__(self, limits: Mapping[tuple[Kind, str], RateLimits], link: RedisLink, *,
                 clock: Clock | None = None, refresh_s: float = 0.5):
        super().__init__(limits, clock=clock)
        self.link = self.redis = link
        self._script: AsyncScript | None = None
        self.refresh_s = refresh_s
        self._refreshed_at = -math.inf  # time.monotonic(): a refresh per bucket per decision would double Redis's load

    def keys(self, name: str, kind: Kind = "backend") -> list[str]:
        """The Redis keys of one bucket pair; the hash tag keeps them in one cluster slot."""
        limits = self.limits.get((kind, name))
        tag = "{" + f"{kind}:{name}" + "}"
        return [self.redis.key("rl", tag, dim) for dim, _ in (limits.dimensions() if limits else [])]

    async def _run(self, client: Redis, keys: list[str], args: list[Any]) -> Any:
        if self._script is None:
            self._script = client.register_script(_TAKE)
        return await self._script(keys=keys, args=args, client=client)

    async def _call(self, kind: Kind, name: str, tokens: float, *, force: bool) -> list[Any] | None:
        """The script's reply, or None while Redis is unreachable."""
        limits = self.limits[(kind, name)]
        now = "" if self.clock is None else repr(self.clock())
        args: list[Any] = [now, "1" if force else "0"]
        buckets = self._bucket(kind, name)
        assert buckets is not None
        local_now = self._now()
        for (dim, limit), bucket in zip(limits.dimensions(), [b for b in (buckets.rpm, buckets.tpm) if b is not None],
                                        strict=True):
            cost = 1 if dim == "rpm" and not force else (0 if dim == "rpm" else tokens)
            args += [limit, cost, repr(bucket.level_at(local_now))]
        keys = self.keys(name, kind)
        return await self.redis.call(lambda client: self._run(client, keys, args), None)

    def _mirror(self, kind: Kind, name: str, reply: list[Any]) -> None:
        """Keep this process's buckets at the levels Redis reported."""
        buckets = self._bucket(kind, name)
        assert buckets is not None
        now = self._now()
        for bucket, level in zip([b for b in (buckets.rpm, buckets.tpm) if b is not None], reply[3:], strict=True):
            bucket.level, bucket.at = float(level), now

    async def take(self, name: str, tokens: int, kind: Kind = "backend") -> Limited | None:
        limits = self.limits.get((kind, name))
        if limits is None:
            return None
        reply = await self._call(kind, name, tokens, force=False)
        if reply is None:  # Redis is down: this replica's own buckets, from the last level seen
            return self._take_here(kind, name, tokens)
        self._mirror(kind, name, reply)
        if int(reply[0]) == 1:
            return None
        dim, limit = limits.dimensions()[int(reply[2]) - 1]
        return Limited(f"{dim} {limit:g}", float(reply[1]))

    async def refresh(self) -> None:
        """Read every bucket's level from Redis (a correction of nothing: the script refills and
        reports), so `peek` sees what other replicas used; at most every `state.refresh_ms`."""
        if time.monotonic() - self._refreshed_at < self.refresh_s:
            return
        self._refreshed_at = time.monotonic()
        for kind, name in self.limits:
            reply = await self._call(kind, name, 0, force=True)
            if reply is None:
                return  # Redis is down: the local buckets are all there is
            self._mirror(kind, name, reply)

    async def settle(self, name: str, charged: int, used: int, kind: Kind = "backend") -> None:
        buckets = self._bucket(kind, name)
        if buckets is None:
            return
        delta = buckets.correction(charged, used)
        if not delta:
            return
        reply = await self._call(kind, name, delta, force=True)
        if reply is None:
            buckets.settle(charged, used, self._now())
        else:
            self._mirror(kind, name, reply)


def rate_limiter_for(config: Config, link: RedisLink | None) -> RateLimiter:
    """The limiter a config asks for: in Redis when `link` (state: backend: redis), else here."""
    limits = limits_from_config(config)
    if link is None:
        return RateLimiter(limits)
    return RedisRateLimiter(limits, link, refresh_s=config.state.refresh_ms / 1000)
