"""The shipped deployment (examples/deploy) and the shapes it relies on: the request log goes to
PostgreSQL without needing a writable local directory, and the image runs as a user of its own
whose ROUTE_HOME is a writable volume. Docker cannot run here, so the image's shape is read from
its Dockerfile and compose file, and `route serve` is started the way the image starts it: the
same command, the same environment, the same route.yaml (its backends pointed at the
SIMULATED server), against a real Redis and a real PostgreSQL."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
import yaml

from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "examples" / "deploy"
ROUTE = [sys.executable, "-m", "router.cli"]

pytestmark = pytest.mark.integration


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined."""
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _image_env() -> dict[str, str]:
    env = {}
    for instruction, args in _dockerfile():
        if instruction == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                env[name] = value
    return env



def _prompts(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [row[0] for row in conn.execute("SELECT prompt FROM requests ORDER BY id")]


def _volumes() -> list[str]:
    return [v for instruction, args in _dockerfile() if instruction == "VOLUME" for v in yaml.safe_load(args)]


def _replica_homes(home: str) -> dict[str, list[str]]:
    """Per route replica of compose.yaml, the volumes it mounts at `home`."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    replicas = {name: s for name, s in compose["services"].items() if name.startswith("route-")}
    return {name: [v.split(":")[0] for v in s["volumes"] if v.split(":")[1] == home] for name, s in replicas.items()}


def _image_user() -> tuple[str, list[str]]:
    """The USER the image runs as, and the RUN steps that make a user."""
    steps = _dockerfile()
    [user] = [args for instruction, args in steps if instruction == "USER"]
    return user, [args for instruction, args in steps if instruction == "RUN" and "useradd" in args]


def test_the_image_runs_as_a_user_of_its_own_whose_route_home_is_a_volume():
    user, made = _image_user()
    assert user not in ("root", "0", "nobody"), user
    home = _image_env()["ROUTE_HOME"]
    assert made and user in made[0].split() and home in made[0], made  # the user is made with ROUTE_HOME its home
    assert home in _volumes()
    homes = _replica_homes(home)
    assert len(homes) == 2 and all(len(h) == 1 for h in homes.values()), homes  # one volume each at ROUTE_HOME
    named = {h[0] for h in homes.values()}
    assert len(named) == 2 and named <= set(yaml.safe_load((DEPLOY / "compose.yaml").read_text())["volumes"])


def _serve(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    proc = subprocess.Popen([*ROUTE, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    port = int(args[args.index("--port") + 1])
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"route serve did not start: {proc.stdout.read().decode()}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.stdout.read().decode()


def test_route_serve_started_as_the_image_starts_it_logs_to_postgres(sim, pg_dsn, redis_server, tmp_path):
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    replica = compose["services"]["route-a"]
    config = yaml.safe_load((DEPLOY / "route.yaml").read_text())
    for backend in config["backends"].values():
        backend["base_url"] = sim.base_url  # the one change: the SIMULATED server stands in for the models
    route_yaml = tmp_path / "route.yaml"
    route_yaml.write_text(yaml.safe_dump(config))
    volume = tmp_path / "volume"  # what the image's ROUTE_HOME volume holds: empty and writable
    volume.mkdir()
    image = _image_env()
    env = {**os.environ, **image, "ROUTE_HOME": str(volume), "PYTHONPATH": str(ROOT),
           "ROUTE_API_KEY": "deploy-key-0123456789abcdef", "ROUTE_REDIS_URL": redis_server.url,
           "ROUTE_PG_DSN": pg_dsn, "ANTHROPIC_API_KEY": "", "INCEPTION_API_KEY": ""}
    args = list(replica["command"])
    port = free_port()
    args[args.index("--port") + 1] = str(port)
    args[args.index("--config") + 1] = str(route_yaml)
    proc = _serve(args, env, tmp_path)
    try:
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                            headers={"authorization": f"Bearer {env['ROUTE_API_KEY']}"},
                            json={"model": "diffusiongemma", "messages": [{"role": "user", "content": "hi fleet"}]})
        assert answer.status_code == 200, answer.text
    finally:
        output = _stop(proc)
    assert _prompts(pg_dsn) == ["hi fleet"], output
    assert "Traceback" not in output and "learning off" not in output, output


@pytest.mark.parametrize("command", ["serve", "ask"])
def test_a_postgres_log_needs_no_writable_local_directory(sim, pg_dsn, tmp_path, route_home, command):
    (route_home / "data").write_text("not a directory")  # the data dir cannot be made
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump({
        "backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url}},
        "routing": {"tiers": [{"name": "only", "backends": ["small"]}]},
        "log": {"backend": "postgres", "dsn": "${ROUTE_PG_DSN}"}}))
    env = {**os.environ, "ROUTE_HOME": str(route_home), "PYTHONPATH": str(ROOT), "ROUTE_PG_DSN": pg_dsn}
    if command == "ask":
        done = subprocess.run([*ROUTE, "-c", str(config), "hello"], env=env, capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.strip(), done.stderr
        output = done.stderr
    else:
        port = free_port()
        proc = _serve(["serve", "--port", str(port), "-c", str(config)], env, tmp_path)
        try:
            answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                                json={"model": "auto", "messages": [{"role": "user", "content": "hello"}]})
            assert answer.status_code == 200
        finally:
            output = _stop(proc)
    assert _prompts(pg_dsn) == ["hello"], output
    assert "request log and latency learning off" not in output and "Traceback" not in output
    # The local latency history is what the data dir costs: said once.
    assert sum("latency" in line for line in output.splitlines()) == 1, output
