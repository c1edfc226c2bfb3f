"""What each class of failure does in the router (issue 38, backends/faults.py): only the
backend's faults and pressure count against it (breaker, learned latency, retry budget); the
request's fault ends the request without trying a backend that writes requests the same way;
the credential's fails over. In-process, with scripted backends."""

from __future__ import annotations

import pytest

from backends.base import BackendSettings
from backends.errors import AllBackendsFailed, AuthError, BackendUnavailable, BadRequest, RateLimited
from backends.fake import FakeBackend, FakeStep
from router import Router

pytestmark = pytest.mark.unit


class OtherShape(FakeBackend):
    """A backend that writes requests another way (another kind or dialect)."""

    @property
    def shape(self) -> str:
        return "other"


def _router(steps: dict[str, list[FakeStep]], shapes: dict[str, type[FakeBackend]] | None = None):
    names = list(steps)
    backends = {name: (shapes or {}).get(name, FakeBackend)(BackendSettings(name=name, model=f"{name}-m"),
                                                            steps=steps[name]) for name in names}
    # A tier each, in the order given: a short prompt is tried on them in that order (up the tiers).
    tiers = [{"name": f"t{i}", "below": round((i + 1) / len(names), 3), "backends": [name]} for i, name in enumerate(names)]
    tiers[-1].pop("below")
    config = {"backends": {name: {"kind": "fake", "model": f"{name}-m", "max_retries": 2} for name in names},
              "routing": {"scorer": {"kind": "length", "threshold_chars": 100}, "tiers": tiers,
                          "on_deadline_risk": "downgrade", "breaker": {"failures": 3}}}
    return Router.from_config(config, backends=backends), backends


def _failure_samples(router: Router, name: str) -> int:
    return router.latency.model(name).failures.count


@pytest.mark.parametrize("error", [BadRequest("max_tokens: too large", backend="a", param="max_tokens"),
                                   AuthError("key refused", backend="a")])
async def test_neither_the_requests_fault_nor_the_keys_counts_against_the_backend(error):
    router, backends = _router({"a": [FakeStep(error=error)] * 6})
    for _ in range(6):
        with pytest.raises(AllBackendsFailed):
            await router.acomplete("hi", model="a")
    breaker = router.breakers["a"]
    assert breaker.state == "closed" and not breaker.failing
    assert _failure_samples(router, "a") == 0
    assert router.calls.retry_budget.tokens("a") == router.calls.retry_budget.settings.max_tokens
    assert len(backends["a"].calls) == 6  # never retried
    assert (await router.acomplete("hi", model="a")).backend == "a"


@pytest.mark.parametrize("error", [BackendUnavailable("HTTP 500", backend="a"), RateLimited("429", backend="a")])
async def test_the_backends_fault_and_pressure_do(error):
    router, _ = _router({"a": [FakeStep(error=error)] * 3})
    for _ in range(3):
        with pytest.raises(AllBackendsFailed):
            await router.acomplete("hi", model="a")
    assert router.breakers["a"].state == "open" and _failure_samples(router, "a") > 0


async def test_a_refused_request_is_not_sent_to_a_backend_of_the_same_shape_but_is_to_another():
    refused = BadRequest("Unrecognized request argument supplied: top_k", backend="a", param="top_k")
    router, backends = _router({"a": [FakeStep(error=refused)], "b": [], "c": []}, shapes={"c": OtherShape})
    result = await router.acomplete("hi")
    assert result.backend == "c" and backends["b"].calls == []  # b writes it as a did
    router, backends = _router({"a": [FakeStep(error=refused)], "b": []})
    with pytest.raises(AllBackendsFailed) as failed:
        await router.acomplete("hi")
    assert [type(e) for e in failed.value.exceptions] == [BadRequest] and backends["b"].calls == []
    assert "not sent to b, which would write it the same way" in str(failed.value)


async def test_a_refused_key_fails_over_to_a_backend_with_another():
    router, backends = _router({"a": [FakeStep(error=AuthError("HTTP 401", backend="a"))], "b": []})
    result = await router.acomplete("hi")
    assert result.backend == "b" and [type(e) for e in result.failures] == [AuthError]
    assert router.breakers["a"].state == "closed"


async def test_only_the_first_candidate_is_retried():
    """A retry bets on a blip: the request places one bet, on its first backend."""
    down = BackendUnavailable("HTTP 500", backend="x")
    router, backends = _router({"a": [FakeStep(error=down)] * 3, "b": [FakeStep(error=down)] * 3, "c": []})
    result = await router.acomplete("hi")
    assert result.backend == "c"
    assert len(backends["a"].calls) == 3 and len(backends["b"].calls) == 1  # a: 1 + 2 retries; b: once
