"""A throwaway PostgreSQL server for tests: `initdb` into a temp dir, `pg_ctl start` on a free
loopback port, stopped and deleted afterwards. Registered in conftest.py as a pytest plugin.

Fixtures:
- `postgres`: one server for the session (password auth on 127.0.0.1, as a fleet's would be);
- `pg_dsn`: a fresh database on it per test, its DSN exported as ROUTE_PG_DSN (configs name
  `${ROUTE_PG_DSN}`, never the password);
- `PostgresServer` itself, for a test that stops and restarts a server of its own, or freezes
  it (SIGSTOP) and thaws it.

The binaries come from the `postgresql` package (/usr/lib/postgresql/<version>/bin). Without
them a test is skipped, naming the install command, except under CI (the `CI` variable set),
where a missing server is a failure: CI must run these tests. initdb and postgres refuse to
run as root, so as root they run as the `postgres` user, in a temp dir it owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import free_port

__all__ = ["PostgresServer", "pg_dsn", "postgres"]

INSTALL = "apt-get install postgresql"


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the PostgreSQL tests: {INSTALL}", pytrace=False)
    pytest.skip(f"{reason}: {INSTALL}")



class PostgresServer:
    """One PostgreSQL cluster in a temp dir, on a free port of 127.0.0.1. `start()` and `stop()`
    may be called again (same port, same data): how a test takes the database away mid-run."""

    user = "route"

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            _unavailable("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        assert bindir is not None
        self.bindir = bindir
        self.password = secrets.token_hex(12)
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="route-pg-"))
        self.data = self.root / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse root
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        pwfile = self.root / "pw"
        pwfile.write_text(self.password)
        if self._as:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--pwfile", str(pwfile), "--auth-local=trust",
                  "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
        pwfile.unlink()
        self.running = False

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bindir / tool), *args], capture_output=True, text=True,
                              cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.root / "log"),
                  "-o", options)
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "60")
            self.running = False

    def _processes(self) -> list[int]:
        """The postmaster and every process it started (backends, writers): all of the server."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended meanwhile
                continue
            if int(fields[1]) == postmaster:
                children.append(int(Path(stat).parent.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the whole server: connections stay open and the kernel still accepts
        connects and acknowledges data, but nothing answers (a hung host, a stuck disk). The
        postmaster first, so it forks no process after the list is read."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        for pid in self._processes():
            with contextlib.suppress(ProcessLookupError):  # a backend that ended meanwhile
                os.kill(pid, signum)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; returns its DSN."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session."""
    server = PostgresServer()
    with server:
        yield server


@pytest.fixture
def pg_dsn(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh database on the session's server; its DSN is also ROUTE_PG_DSN, for configs."""
    dsn = postgres.create_database()
    monkeypatch.setenv("ROUTE_PG_DSN", dsn)
    return dsn
