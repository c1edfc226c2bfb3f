"""One builder, no setters (issue 45): a router is whole when it is built. The server's app
registers nothing on the router it serves; it watches the requests it serves through the
request scope (router/server/metrics.py `Served`), so a router shared by two apps and the Python API is
counted by each app for its own requests only, consortium members and arbiters included. A
behaviour is asked for by name (`clients_retry`), never read off the `source` label."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from backends.deadline import Deadline
from backends.errors import AllBackendsFailed
from backends.types import Request
from router import Router
from router.calls import CallOptions
from router.config_loader import load_config
from router.server import RouteServer
from router.server.app import create_app
from tests.helpers import Watched, make_router

pytestmark = pytest.mark.integration

ASK = {"messages": [{"role": "user", "content": "hi"}]}


def _requests(server: RouteServer) -> float:
    """route_requests_total over every label: the routed requests this app counted."""
    total = 0.0
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith("route_requests_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _attempts(server: RouteServer, backend: str) -> float:
    prefix = f'route_upstream_attempts_total{{backend="{backend}",outcome="ok"}} '
    return next((float(line.removeprefix(prefix)) for line in httpx.get(f"{server.url}/metrics").text.splitlines()
                 if line.startswith(prefix)), 0.0)


def test_building_an_app_registers_nothing_on_the_router(sim):
    router = make_router(sim)
    attempt_observers, request_observers = router.calls.observers, list(router.scope.parts.request_observers)
    create_app(router)
    create_app(router, close_router=False)
    assert router.calls.observers == attempt_observers
    assert router.scope.parts.request_observers == request_observers
    for setter in ("add_observer", "add_request_observer", "persist"):
        assert not hasattr(router, setter)


def test_each_app_counts_the_requests_it_served_and_none_of_the_python_apis(sim):
    router = make_router(sim)
    with RouteServer(router) as one, RouteServer(router) as other:
        assert httpx.post(f"{one.base_url}/chat/completions", json={"model": "small", **ASK}).status_code == 200
        router.complete("hi", model="small")  # the Python API, on the same router: no app served it
        assert _requests(one) == 1.0 and _attempts(one, "small") == 1.0
        assert _requests(other) == 0.0 and _attempts(other, "small") == 0.0
        # The neighbour: the router's own observers still hear of every request, whoever sent it.
        assert router.latency.model("small").samples == 2


def test_a_consortiums_member_and_arbiter_calls_are_counted_as_the_served_requests(sim):
    router = make_router(sim)
    with RouteServer(router) as server:
        answer = httpx.post(f"{server.base_url}/chat/completions", json={"model": "pair", **ASK}, timeout=30)
        assert answer.status_code == 200
        assert _attempts(server, "glm") == 2.0 and _attempts(server, "arbiter") == 1.0  # glm*2, then the arbiter
        assert _requests(server) == 1.0


async def test_a_watch_sees_its_requests_attempts_and_not_work_its_observers_start(sim):
    """The learner's shadow calls start from a request observer, in the request's context: they
    are not the request's attempts."""
    started: list[asyncio.Task] = []

    def shadow(outcome) -> None:
        started.append(asyncio.create_task(router.calls.complete(
            "small", Request(messages=[{"role": "user", "content": "judge"}]), CallOptions(Deadline(10)))))

    router = Router(make_router(sim).loaded, request_observers=[shadow])
    watch = Watched()
    result = await router.acomplete("hi", model="small", watch=watch)
    await asyncio.gather(*started)
    assert [a.backend for a in watch.attempts] == ["small"] and watch.attempts[0].completion is result.completion
    assert [o.result for o in watch.outcomes] == [result]
    streamed = Watched()
    chunks = [chunk async for chunk in router.astream("hi", model="small", watch=streamed)]
    await asyncio.gather(*started)
    assert len(started) == 2 and len(streamed.attempts) == 1 and streamed.attempts[0].streamed
    assert streamed.outcomes[0].result is not None and chunks
    await router.aclose()


def _flaky(sim, **router: object) -> Router:
    sim.set_faults("m-small", ["500"])  # the first call fails, the next answers
    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url,
                                     "max_retries": 1}},
              "routing": {"tiers": [{"name": "only", "backends": ["small"]}]}}
    return Router(load_config(config), **router)  # type: ignore[arg-type]


async def test_the_source_label_alone_changes_no_behaviour(sim):
    """`source` labels the request log; a server's router that should leave a backend not yet
    heard to its clients' own retries says so (`clients_retry`), as `route serve` does."""
    labelled = _flaky(sim, source="server")
    assert (await labelled.acomplete("hi")).backend == "small"  # retried, as any router retries
    assert sim.stats("m-small")["requests"] == 2
    await labelled.aclose()
    clients_retry = _flaky(sim, source="server", clients_retry=True)
    with pytest.raises(AllBackendsFailed):
        await clients_retry.acomplete("hi")
    assert sim.stats("m-small")["requests"] == 3  # one call: the client's retry is the retry
    await clients_retry.aclose()


def test_the_server_sees_a_router_through_a_few_methods_and_a_read_only_view():
    """The server's modules are typed against this port (router/ports.py), so mypy holds them to it."""
    from router.ports import RouterService
    from router.view import RouterView

    port = {name for name in vars(RouterService) if not name.startswith("_")}
    assert port == {"scope", "view", "verdicts", "refresh", "aclose"}
    settable = [name for name, member in vars(RouterView).items()
                if isinstance(member, property) and member.fset is not None]
    assert settable == [] and RouterView.__slots__ == ("_parts",)
