"""Shared fixtures: one simulated model server per session, a private user dir per test, a guard
that fails any test reaching beyond loopback, and one that keeps `unit` tests in-process."""

from __future__ import annotations

import contextlib
import ipaddress
import multiprocessing.process
import os
import socket
import subprocess
import tempfile
import threading

import pytest
from hypothesis import HealthCheck, settings

# litellm fetches its price map from GitHub at import unless told to use the bundled copy.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# Module- and session-scoped fixtures (routers, servers) are made before the per-test `route_home`
# below applies: they too must never read or write the real user's config and data.
_SESSION_HOME = tempfile.mkdtemp(prefix="route-tests-")
os.environ["ROUTE_HOME"] = os.path.join(_SESSION_HOME, "route-home")
for _var, _sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                   ("XDG_STATE_HOME", "state")):
    os.environ[_var] = os.path.join(_SESSION_HOME, "xdg", _sub)
os.environ.pop("ROUTE_CONFIG", None)

from backends.simulator import SimServer  # noqa: E402  (after the environment above)
from tests.answering import answering as serve_handler  # noqa: E402

# Hypothesis times each example (a 200 ms deadline, a "too slow" health check): a busy machine
# fails those, and a test here never asserts how fast the machine is (tests/test_no_clocks.py).
settings.register_profile("route", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("route")

# Real servers started per test, on free ports (they skip locally, naming the package, when the
# binary is missing; under CI they fail instead).
pytest_plugins = ["tests.redis_server", "tests.postgres_server"]


# Fixtures that are real servers: a test using one goes through sockets.
_SERVER_FIXTURES = {"sim", "answering", "redis_server", "postgres_server"}


_PROBLEM = pytest.StashKey[str]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test says what it is: `unit` (in-process only: no socket, no subprocess) or
    `integration` (real sockets, servers or processes), by its file's `pytestmark` or its own
    mark; `pytest -m unit` runs the fast part. The declaration is checked: an undeclared test, or
    a unit test using a server fixture, fails; one that connects or starts a process fails when
    it does (`_unit_stays_in_process`)."""
    for item in items:
        kind = _kind(item)
        if kind is None:
            item.stash[_PROBLEM] = ("declare it `pytest.mark.unit` (in-process only) or `pytest.mark.integration` "
                                    "(sockets, servers, processes), e.g. in its file's `pytestmark`")
        elif kind == "unit" and (servers := _SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.stash[_PROBLEM] = f"marked unit but uses {', '.join(sorted(servers))}: mark it integration"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if (problem := item.stash.get(_PROBLEM, None)) is not None:
        pytest.fail(f"{item.nodeid}: {problem}", pytrace=False)


def _kind(item: pytest.Item) -> str | None:
    if item.get_closest_marker("integration"):
        return "integration"
    return "unit" if item.get_closest_marker("unit") else None


class InProcessOnly(RuntimeError):
    """A unit test connected somewhere or started a process."""


@pytest.fixture(autouse=True)
def _unit_stays_in_process(request, monkeypatch):
    """In a unit test, on the test's own thread, connecting a network socket, listening, or
    starting a process raises InProcessOnly naming the fix (mark the test integration)."""
    if _kind(request.node) != "unit":
        yield
        return
    me = threading.get_ident()

    def refuse(what: str) -> None:
        if threading.get_ident() == me:
            raise InProcessOnly(f"{request.node.nodeid} is marked unit but {what}: mark it "
                                "`@pytest.mark.integration` (or move it to an integration file)")

    def guarded(name: str, real, what: str, network_only: bool = False):
        def call(self, *args, **kwargs):
            if not (network_only and getattr(self, "family", None) == getattr(socket, "AF_UNIX", None)):
                refuse(what)
            return real(self, *args, **kwargs)
        return call

    for name, what in (("connect", "connects a socket"), ("connect_ex", "connects a socket"),
                       ("listen", "listens on a socket")):
        monkeypatch.setattr(socket.socket, name, guarded(name, getattr(socket.socket, name), what, network_only=True))
    monkeypatch.setattr(subprocess.Popen, "__init__", guarded("__init__", subprocess.Popen.__init__, "starts a process"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                        guarded("start", multiprocessing.process.BaseProcess.start, "starts a process"))
    real_fork = os.fork

    def fork() -> int:
        # A fork from a test worker copies the locks its other threads hold (servers, leftover
        # writers): the child can hang inside a library. Fork in a process of the test's own.
        refuse("forks this test worker")
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    yield


@pytest.fixture(scope="session")
def sim():
    """The simulated OpenAI-compatible server, on a free loopback port, for the whole session.
    Reset before every test that uses it."""
    with SimServer() as server:
        yield server


@pytest.fixture
def answering():
    """`answering(handler)` starts a real loopback HTTP server that answers with
    `handler(httpx.Request) -> httpx.Response` (tests/answering.py) and returns its base URL;
    the servers stop when the test ends."""
    with contextlib.ExitStack() as servers:
        yield lambda handler: servers.enter_context(serve_handler(handler))


@pytest.fixture
def paid(answering):
    """A real (not simulated) OpenAI-compatible upstream on a loopback port that records the
    bodies it is sent (tests/helpers.py `PaidUpstream`): its answers cost, so a spend cap counts them."""
    from tests.helpers import PaidUpstream

    upstream = PaidUpstream()
    upstream.base_url = answering(upstream)
    return upstream


@pytest.fixture(autouse=True)
def _fresh_sim(request):
    # Only tests that use the server pay for it; they all start from a clean one.
    if "sim" in request.fixturenames:
        request.getfixturevalue("sim").reset()


@pytest.fixture(autouse=True)
def route_home(tmp_path, monkeypatch):
    """Config, data and cache dirs live under a per-test tmp dir, never the real user's."""
    home = tmp_path / "route-home"
    home.mkdir()
    monkeypatch.setenv("ROUTE_HOME", str(home))
    monkeypatch.delenv("ROUTE_CONFIG", raising=False)
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(tmp_path / "xdg" / sub))
    return home


class NetworkBlocked(OSError):
    """A test tried to connect beyond loopback."""


def _is_loopback(family: int, address: object) -> bool:
    if family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) else address
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False  # a host name other than localhost would need DNS: not loopback
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@pytest.fixture(autouse=True)
def network_guard(monkeypatch):
    """Connections beyond loopback raise NetworkBlocked and fail the test at teardown, even
    when the code under test catches the error. Yields the list of blocked addresses."""
    blocked: list[object] = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address: object) -> None:
        if not _is_loopback(sock.family, address):
            blocked.append(address)
            raise NetworkBlocked(f"test tried to connect beyond loopback: {address!r}")

    def connect(self, address):
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        check(self, address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield blocked
    if blocked:
        pytest.fail(f"connections beyond loopback attempted: {blocked!r}", pytrace=False)
