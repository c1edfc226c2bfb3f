"""The retry policy's limits per error class (policies/retry.py), on their own and as
`routing.retries` in a config, through the call path to the simulated model server.

A class named in `per_class` is retried exactly as often as it says, whatever the backend's
`max_retries`; a class not named follows `max_retries`; errors that are not retryable never are.
The limit of the error just raised is compared with the retries made so far in the call, of any
class. Backoffs are 0 here (a 429 with `Retry-After: 0`, `backoff_initial_s=0`), so no test waits."""

from __future__ import annotations

import pytest

from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, AuthError, BackendTimeout, BackendUnavailable, RateLimited
from policies.retry import RetryPolicy
from router.calls import call_with_retries
from router.config_loader import load_config
from router.core import Router

pytestmark = pytest.mark.unit


def _failing(errors: list[BaseException]):
    """An attempt that raises `errors` in turn, then answers "ok"; `calls` counts attempts."""
    calls = [0]

    async def attempt() -> str:
        calls[0] += 1
        if calls[0] <= len(errors):
            raise errors[calls[0] - 1]
        return "ok"

    return attempt, calls


def _timeout() -> BackendTimeout:
    return BackendTimeout("slow", backend="x")


def _limited() -> RateLimited:
    return RateLimited("429", backend="x", retry_after=0.0)


@pytest.mark.parametrize("per_class, max_retries, attempts", [
    ({}, 2, 3),                              # no class named: max_retries
    ({"BackendTimeout": 0}, 5, 1),           # the class's limit wins over a larger max_retries
    ({"BackendTimeout": 4}, 0, 5),           # ... and over a smaller one
    ({"RateLimited": 0}, 5, 6),              # another class's limit does not apply
])
async def test_a_class_is_retried_as_often_as_its_own_limit_says(per_class, max_retries, attempts):
    attempt, calls = _failing([_timeout() for _ in range(10)])
    policy = RetryPolicy(max_retries, backoff_initial_s=0.0, per_class=per_class)
    with pytest.raises(BackendTimeout):
        await call_with_retries(attempt, policy=policy, deadline=Deadline(None))
    assert calls[0] == attempts


async def test_an_answer_within_the_limit_ends_the_retries():
    attempt, calls = _failing([_limited(), _limited(), _limited()])
    policy = RetryPolicy(0, backoff_initial_s=0.0, per_class={"RateLimited": 3})
    assert await call_with_retries(attempt, policy=policy, deadline=Deadline(None)) == "ok"
    assert calls[0] == 4


async def test_the_limit_of_the_error_raised_is_compared_with_every_retry_made_so_far():
    attempt, calls = _failing([_limited(), _limited(), _timeout(), _timeout()])
    policy = RetryPolicy(0, backoff_initial_s=0.0, per_class={"RateLimited": 4, "BackendTimeout": 2})
    with pytest.raises(BackendTimeout):  # two retries made, BackendTimeout allows two: no third
        await call_with_retries(attempt, policy=policy, deadline=Deadline(None))
    assert calls[0] == 3


async def test_an_error_that_is_not_retryable_never_is_whatever_the_limits_say():
    attempt, calls = _failing([AuthError("bad key", backend="x")])
    policy = RetryPolicy(5, backoff_initial_s=0.0, per_class={"AuthError": 5})
    with pytest.raises(AuthError):
        await call_with_retries(attempt, policy=policy, deadline=Deadline(None))
    assert calls[0] == 1


def test_allows_reads_the_class_limit_and_the_default():
    policy = RetryPolicy(1, per_class={"RateLimited": 3, "BackendUnavailable": 0})
    assert [policy.allows(_limited(), n) for n in range(4)] == [True, True, True, False]
    assert [policy.allows(_timeout(), n) for n in range(2)] == [True, False]
    assert not policy.allows(BackendUnavailable("down", backend="x"), 0)


# -- routing.retries, from config, through the call path ----------------------------------------


def _router(sim, retries: dict[str, int], max_retries: int) -> Router:
    config = {"backends": {"only": {"kind": "openai", "model": "m-retry", "base_url": sim.base_url,
                                    "max_retries": max_retries}},
              "routing": {"tiers": [{"name": "all", "backends": ["only"]}], "retries": retries},
              "log": {"enabled": False}}
    return Router(load_config(config), log=False)


@pytest.mark.integration
async def test_routing_retries_from_config_set_each_classs_limit(sim):
    sim.update_profile("m-retry", retry_after_s=0.0)
    sim.set_faults("m-retry", ["429", "429", "429"])
    router = _router(sim, {"RateLimited": 3}, max_retries=0)
    assert (await router.acomplete("hi", model="only")).completion.backend == "only"
    assert sim.stats("m-retry")["requests"] == 4  # three 429s retried although max_retries is 0
    await router.aclose()


@pytest.mark.integration
async def test_a_class_set_to_zero_in_config_is_not_retried_though_max_retries_allows_it(sim):
    sim.set_faults("m-retry", ["500", None])
    router = _router(sim, {"BackendUnavailable": 0}, max_retries=5)
    with pytest.raises(AllBackendsFailed):
        await router.acomplete("hi", model="only")
    assert sim.stats("m-retry")["requests"] == 1
    await router.aclose()


@pytest.mark.integration
async def test_a_class_not_named_in_config_follows_max_retries(sim):
    sim.update_profile("m-retry", retry_after_s=0.0)
    sim.set_faults("m-retry", ["429", "429", "429"])
    router = _router(sim, {"BackendUnavailable": 0}, max_retries=1)
    with pytest.raises(AllBackendsFailed):
        await router.acomplete("hi", model="only")
    assert sim.stats("m-retry")["requests"] == 2
    await router.aclose()
