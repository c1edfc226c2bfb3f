"""Feedback on routed requests -- the labels `route calibrate --from-log` refits the scorer on --
and the rules for who may give it.

Two sources, one `feedback` table, in the request log's own store (SQLite or PostgreSQL):
- a verdict on one request, `good` or `bad` (`Router.feedback`, `route feedback`,
  `POST /v1/feedback`), on the request log's id (what `route log` shows) or the request's trace id;
- consortium traces: when one consortium round ranked a member of the local tier against a
  hosted one, the arbiter's order is a preference between them for that prompt.

Rules for verdicts (`record_feedback`), since these labels steer routing:
- only on a request the log holds (404 otherwise); a router without a request log (`--no-log`)
  takes none, and opens no file;
- a client key judges only requests made with it (each record names its key, `key_name`); an
  admin key -- `server.keys.NAME.admin: true`, or the `--api-key-env` key, the operator's own --
  judges any (403 otherwise); the CLI and the Python API are the operator's and judge any;
- one verdict per request: a later one replaces it, so repeating a verdict adds no weight;
- at most `server.feedback_rpm` verdicts a minute per key (429 with Retry-After beyond), in this
  process; the CLI and the Python API are not limited;
- a verdict is trusted when the operator stands behind it (the CLI, the Python API, an admin
  key): learning takes every trusted label, but at most `routing.learn.max_labels_per_key` of
  each other key's, so no single key -- nor a few -- can move what routing learns
  (router/learning/learner.py).

`labelled_records` turns both sources into routing records `{"id", "prompt", "local", "hosted"}`:
a request the local tier answered well needed no hosted model (1, 1); one it answered badly did
(0, 1); a hosted answer judged bad gained nothing over local (0, 0); a hosted answer judged good
says nothing about what local would have done and is left out. Verdicts on requests whose prompt
was not logged (`log.store_content: false`) are left out too.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from backends.errors import UsageError
from backends.types import last_user_text
from policies.rate_limit import TokenBucket
from router.store.health import StoreError

if TYPE_CHECKING:
    from router.config import Config
    from router.config_loader import LoadedConfig
    from router.decision import Outcome
    from router.store.queries import LogReader
    from router.store.request_log import RequestLog

__all__ = ["VERDICTS", "Feedback", "FeedbackRefused", "attach_consortium_preferences", "consortium_preferences",
           "is_admin", "is_trusted", "judge", "labelled_records", "local_backends"]

_LOG = logging.getLogger("route")
VERDICTS = ("good", "bad")


class FeedbackRefused(UsageError):
    """A verdict the rules refuse; `status` is its HTTP status (404, 403, 429)."""

    def __init__(self, message: str, status: int, retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


def is_admin(config: Config, key: str | None) -> bool:
    """Whether the client key named `key` may judge any request: a `server.keys` entry with
    `admin: true`, or the `--api-key-env` key (the one key not among `server.keys`)."""
    if key is None:
        return False
    spec = config.server.keys.get(key)
    return spec is None or spec.admin


def is_trusted(config: Config, giver: str | None) -> bool:
    """Whether the operator stands behind a verdict given with client key `giver` (None: given
    through the CLI or the Python API, the operator's own)."""
    return giver is None or is_admin(config, giver)


class FeedbackGate:
    """Per client key, a bucket of `per_minute` verdicts (policies/rate_limit.py)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: dict[str | None, TokenBucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str | None) -> None:
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = TokenBucket(self.per_minute, now)
            wait = bucket.take(1, now)
        if wait:
            who = f"key {key!r}" if key is not None else "this client"
            raise FeedbackRefused(f"feedback from {who} is at its rate limit ({self.per_minute} verdicts a minute, "
                                  f"server.feedback_rpm); retry after {math.ceil(wait)} s.", 429,
                                  retry_after_s=max(1, math.ceil(wait - 1e-9)))


def _check(request_id: str | int, verdict: str) -> str:
    if verdict not in VERDICTS:
        raise UsageError(f"feedback must be `good` or `bad`, got {verdict!r}.")
    ref = str(request_id).strip()
    if not ref:
        raise UsageError("feedback needs a request id: the id `route log` shows, or a trace id.")
    return ref


def judge(store: LogReader, request_id: str | int, verdict: str, *, key: str | None = None,
          admin: bool = False) -> int:
    """Record `verdict` on the request `request_id` names, by the rules above (all but the rate
    limit); returns its log id."""
    ref = _check(request_id, verdict)
    with store.guard():
        found = store.find_request(ref)
        if found is None:
            raise FeedbackRefused(f"no request {ref} in the request log; `route log` lists the recent ones (feedback "
                                  "takes the id it shows, or a trace id).", 404)
        if not admin and found["key_name"] != key:
            raise FeedbackRefused("this key may give feedback only on requests made with it (an admin key, "
                                  "server.keys.NAME.admin: true, may judge any).", 403)
        store.add_verdict(int(found["id"]), verdict, key)
    return int(found["id"])


class Feedback:
    """Verdicts through one router (its server's endpoint, `Router.feedback`), by the rules
    above, into the request log's store. `log`: this process's request log (None: the router
    keeps none, and takes no verdict)."""

    def __init__(self, loaded: LoadedConfig, log: RequestLog | None):
        self.loaded, self.log = loaded, log
        self.gate = FeedbackGate(loaded.config.server.feedback_rpm)

    def record(self, request_id: str | int, verdict: str, *, key: str | None = None, admin: bool = False) -> int:
        """`key` is the name of the client key it came with (None: no key), `admin` whether that
        key may judge any request; returns the request's log id. Raises UsageError
        (FeedbackRefused with an HTTP status) when a rule refuses it."""
        _check(request_id, verdict)
        if self.log is None:
            raise FeedbackRefused("this router keeps no request log (`--no-log`, or `log: {enabled: false}`): there "
                                  "is no request to give feedback on.", 404)
        if key is not None or not admin:  # a client of the server; the operator's own calls are not limited
            self.gate.take(key)
        self.log.flush(timeout_s=5.0)  # the request just answered may still be on its way to the log
        from router.store.choice import open_log

        store = open_log(self.loaded, check=False)
        try:
            return judge(store, request_id, verdict, key=key, admin=admin)
        finally:
            store.close()


def labelled_records(store: LogReader, local_backends: Iterable[str],
                     hosted_backends: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Routing records from the feedback (see the module docstring), oldest first.
    `hosted_backends`: only verdicts on these count as hosted (a boundary between two tiers of
    three); None: every backend that is not local."""
    local = set(local_backends)
    hosted = None if hosted_backends is None else set(hosted_backends)
    out = []
    with store.guard():
        for row in store.feedback_rows():
            if row["source"] == "consortium":
                out.append(_record(f"c{row['id']}", row["prompt"], row["local"], row["hosted"], "consortium"))
            else:
                out.extend(_from_verdict(store, row, local, hosted))
    return [r for r in out if r["prompt"]]


def _from_verdict(store: LogReader, row: dict[str, Any], local: set[str],
                  hosted: set[str] | None) -> list[dict[str, Any]]:
    request = store.find_request(str(row["request"]), "prompt, backend")
    if request is None:
        return []
    good = row["verdict"] == "good"
    giver = row.get("giver")
    if request["backend"] in local:
        return [_record(f"f{row['id']}", request["prompt"], 1.0 if good else 0.0, 1.0, "user", giver)]
    if hosted is not None and request["backend"] not in hosted:
        return []
    return [] if good else [_record(f"f{row['id']}", request["prompt"], 0.0, 0.0, "user", giver)]


def _record(rid: str, prompt: str | None, local: float, hosted: float, source: str,
            giver: str | None = None) -> dict[str, Any]:
    return {"id": rid, "prompt": prompt, "local": float(local), "hosted": float(hosted), "source": source,
            "dataset": "feedback", "giver": giver}  # fmt: skip


def local_backends(router_config: Any) -> set[str]:
    """The backends of the lowest tier: what "local" means for feedback labels."""
    tiers = router_config.routing.tiers
    return set(tiers[0].backends) if tiers else set()


def consortium_preferences(trace: dict[str, Any], local: set[str]) -> list[tuple[float, float]]:
    """(local, hosted) per round whose arbiter ranked a local member against a hosted one:
    (1, 0) when the best-ranked local answer came first, else (0, 1)."""
    prefs = []
    for rnd in trace.get("rounds") or ():
        ranked = _ranked_members(rnd)
        is_local = [m in local for m in ranked]
        if True in is_local and False in is_local:
            prefs.append((1.0, 0.0) if is_local[0] else (0.0, 1.0))
    return prefs


def _ranked_members(rnd: dict[str, Any]) -> list[str]:
    """The member (backend) names of one round's candidates, in the arbiter's order."""
    order = (rnd.get("arbiter") or {}).get("order") or []
    members = {f"{m['member']}#{m['sample']}": m["member"] for m in rnd.get("members") or ()}
    return [members[label] for label in order if label in members]


def attach_consortium_preferences(loaded: LoadedConfig, observe: Callable[[Callable[[Outcome], None]], None]) -> None:
    """Record consortium preferences as requests finish, in the request log's store (only with
    the log on, and only where prompts are stored: a preference without its prompt teaches
    nothing), registering with `observe`. A store that cannot take one costs the preference,
    never the request."""
    if not loaded.config.log.store_content:
        return
    local = local_backends(loaded.config)
    store: list[LogReader] = []  # opened on the first preference, not at start-up
    warned: list[bool] = []

    def observe_outcome(outcome: Outcome) -> None:
        result = outcome.result
        trace = result.completion.metadata.get("trace") if result is not None else None
        if not isinstance(trace, dict):
            return
        prompt = last_user_text(outcome.messages)
        try:
            for lo, hi in consortium_preferences(trace, local):
                if not store:
                    from router.store.choice import open_log

                    store.append(open_log(loaded, check=False))
                with store[0].guard():
                    store[0].add_preference(str(trace.get("id")), prompt, lo, hi)
        except StoreError as exc:
            if not warned:
                warned.append(True)
                _LOG.warning("route: consortium preferences not recorded: %s", exc)

    observe(observe_outcome)
