"""Learned latency in Redis: one key per backend holding `LatencyModel.to_dict()` as JSON, and
the merge that replays a replica's fresh samples onto it, run inside Redis as one Lua script.

Why a script: Redis runs it atomically, so any number of replicas (and concurrent flushes within
one) merge in one round trip each, with no lost update and no retry loop. An optimistic
WATCH/MULTI transaction would retry every loser of a race, which under many writers on one key
costs quadratically many round trips.

The script is `DecayedHistogram.merged` and `LatencyModel.merged` (policies/latency.py) written
again in Lua; tests/test_shared_latency.py checks the two agree on the same inputs. Redis's cjson
writes numbers with 14 significant digits: a relative error of 1e-14 per merge, far below what a
latency estimate can tell apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from policies.latency import LatencyModel

if TYPE_CHECKING:
    from router.state.redis_link import RedisLink

__all__ = ["MERGE_SCRIPT", "RedisLatency"]

# KEYS[i]: one backend's state. ARGV[2i-1]: its fresh samples (JSON of LatencyModel.to_dict);
# ARGV[2i]: its histograms' decay factor per sample (`keep`). Returns each merged state as JSON.
MERGE_SCRIPT = """
local PRUNE = 1e-9
local PARTS = {'first', 'unit', 'answer', 'failures'}

local function merge_hist(old, new, keep)
  old = old or {}
  new = new or {}
  local bins, new_bins = {}, new.bins or {}
  local weight, total = tonumber(old.weight) or 0, tonumber(old.total) or 0
  local n = tonumber(new.count) or 0
  local decays = n > 0 and next(old.bins or {}) ~= nil
  local factor = decays and keep ^ n or 1
  for index, w in pairs(old.bins or {}) do
    local kept = w * factor
    if not decays or kept > PRUNE then bins[index] = kept end
  end
  if decays then
    weight, total = weight * factor, total * factor
  end
  for index, w in pairs(new_bins) do
    bins[index] = (bins[index] or 0) + w
  end
  return {bins = bins, weight = weight + (tonumber(new.weight) or 0), total = total + (tonumber(new.total) or 0),
          count = (tonumber(old.count) or 0) + n}
end

local out = {}
for i, key in ipairs(KEYS) do
  local fresh = cjson.decode(ARGV[2 * i - 1])
  local keep = tonumber(ARGV[2 * i])
  local raw = redis.call('GET', key)
  local stored = raw and cjson.decode(raw) or {}
  if stored.v ~= fresh.v or stored.decoding ~= fresh.decoding then
    stored = {}  -- written for another setup (as LatencyModel.load_dict refuses it): start over
  end
  local merged = {v = fresh.v, decoding = fresh.decoding,
                  last_ts = math.max(tonumber(stored.last_ts) or 0, tonumber(fresh.last_ts) or 0)}
  for _, part in ipairs(PARTS) do
    merged[part] = merge_hist(stored[part], fresh[part], keep)
  end
  local text = cjson.encode(merged)
  redis.call('SET', key, text)
  out[i] = text
end
return out
"""


class RedisLatency:
    """The `LatencySink` for Redis: `merge` runs MERGE_SCRIPT over every backend with fresh
    samples, in one round trip; None while Redis is unreachable (the tracker keeps the samples)."""

    def __init__(self, link: RedisLink, identity: Callable[[str], str] = str):
        self.link = link
        self.identity = identity  # backend name -> what it is (router/backend_table.py), the key's suffix
        self.seen: dict[str, bytes] = {}  # the last state read or written per key, to skip unchanged ones

    def key(self, name: str) -> str:
        return self.link.key("latency", self.identity(name))

    async def merge(self, fresh: Mapping[str, LatencyModel]) -> dict[str, dict[str, Any]] | None:
        names = list(fresh)
        keys = [self.key(name) for name in names]
        args: list[str] = []
        for name in names:
            args += [json.dumps(fresh[name].to_dict()), repr(fresh[name].first.keep)]
        result = await self.link.call(lambda r: r.register_script(MERGE_SCRIPT)(keys=keys, args=args), None)
        if result is None:
            return None
        for key, raw in zip(keys, result):
            self.seen[key] = raw
        return {name: json.loads(raw) for name, raw in zip(names, result)}

    def changed(self, names: list[str], raws: list[bytes | None]) -> dict[str, dict[str, Any]]:
        """From one MGET of `names`' keys: the states that differ from what was last seen."""
        out = {}
        for name, raw in zip(names, raws):
            key = self.key(name)
            if raw is not None and raw != self.seen.get(key):
                self.seen[key] = raw
                out[name] = json.loads(raw)
        return out
