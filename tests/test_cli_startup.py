"""The collector is off while `route` starts and back on before the command's real work:
through the real `main()`, in a fresh process, for the one command that ends its start-up
itself (ask) and for every other. And the program ends without the interpreter's teardown, with
everything that shutdown does for it kept: its status, its output, its exit handlers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import cli_config

pytestmark = pytest.mark.integration  # subprocesses

# Report whether collection is on, and whether start-up's objects were frozen, when the command
# reaches its first upstream-free step that runs after start-up: printing its output.
PROBE = """
import gc, sys
import router.cli.output as output
seen = []
original = output.Output.__init__
def probe(self, *args, **kwargs):
    original(self, *args, **kwargs)
    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
output.Output.__init__ = probe
sys.argv = ["route", *sys.argv[1:]]
from router.cli import main
try:
    main()
except SystemExit:
    pass
print("STATES=" + repr(seen) + " END=" + repr((gc.isenabled(), gc.get_freeze_count() > 0)), file=sys.stderr)
"""


def _run(*args: str, home: Path) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                            cwd=home, env={**os.environ, "ROUTE_HOME": str(home)}, stdin=subprocess.DEVNULL)
    return result.stderr.strip().splitlines()[-1]


def test_ask_starts_without_the_collector_and_collects_once_started(tmp_path):
    line = _run("--explain", "-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")), "hi", home=tmp_path)
    # ask's Output is made before its start-up (collection off); the process ends with it back on.
    assert line.startswith("STATES=[(False, False)") and line.endswith("END=(True, True)"), line


def test_every_other_command_collects_from_its_first_line(tmp_path):
    line = _run("models", "-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")), home=tmp_path)
    assert line.startswith("STATES=[(True, True)") and line.endswith("END=(True, True)"), line


# A program run by end_without_teardown, in a fresh process: an object whose finalizer says when
# the interpreter tears its modules down, an answer left in stdout's buffer (no newline, a pipe),
# and an exit handler registered by the command. `BEFORE` registers one ahead of ours instead.
ENDING = """
import atexit, sys
from router.cli.startup import end_without_teardown

class TornDown:
    def __del__(self):
        sys.stderr.write("TORN DOWN")

kept = TornDown()
if "BEFORE" in sys.argv:
    atexit.register(lambda: sys.stdout.write("|early handler"))

def command():
    atexit.register(lambda: sys.stdout.write("|exit handler"))
    sys.stdout.write("answer")
    how = sys.argv[1]
    if how == "raise":
        raise RuntimeError("boom")
    if how != "return":
        sys.exit(None if how == "none" else int(how) if how.isdigit() else how)

end_without_teardown(command)
"""


def _end(*args: str, python: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *python, "-c", ENDING, *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("how", "status"), [("return", 0), ("none", 0), ("0", 0), ("3", 3), ("130", 130)])
def test_the_program_ends_with_its_status_output_and_exit_handlers_and_no_teardown(how, status):
    done = _end(how)
    assert done.returncode == status, done.stderr
    assert done.stdout == "answer|exit handler"
    assert "TORN DOWN" not in done.stderr


def test_an_exit_message_is_printed_and_ends_with_status_one_as_python_does():
    done = _end("no config here")
    assert (done.returncode, done.stdout) == (1, "answer|exit handler")
    assert "no config here" in done.stderr and "TORN DOWN" not in done.stderr


@pytest.mark.parametrize(("args", "python"), [
    (("3", "BEFORE"), ()),  # a handler registered before ours would never run: the shutdown is whole
    (("3",), ("-X", "dev")),  # development mode's shutdown reports unclosed resources
])
def test_the_teardown_stays_where_skipping_it_would_lose_something(args, python):
    done = _end(*args, python=python)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("answer|exit handler")
    assert "TORN DOWN" in done.stderr
    if "BEFORE" in args:
        assert done.stdout == "answer|exit handler|early handler"


def test_an_uncaught_error_keeps_pythons_own_report_and_status():
    done = _end("raise")
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr and "TORN DOWN" in done.stderr


def test_output_that_cannot_be_flushed_is_left_to_pythons_shutdown(monkeypatch):
    from router.cli.startup import _end_now

    class Closed(io.StringIO):
        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    _end_now([0])  # returns rather than ending the process: Python reports the pipe as it always did


def test_a_request_logged_by_route_is_in_the_log_when_the_process_has_ended(sim, tmp_path):
    """The request log writes from a thread and flushes its last records in an exit handler:
    the program ends after that handler, through the real `python -m router.cli`."""
    config = cli_config(tmp_path, sim.base_url, textwrap.dedent(f"""\
        log:
          path: {tmp_path / "route.db"}
        """))
    env = {**os.environ, "ROUTE_HOME": str(tmp_path)}
    asked = subprocess.run([sys.executable, "-m", "router.cli", "-c", str(config), "--no-stream", "hi"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL)
    assert asked.returncode == 0, asked.stderr
    shown = subprocess.run([sys.executable, "-m", "router.cli", "log", "--json", "-c", str(config)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL)
    assert shown.returncode == 0, shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(row["backend"], row["status"]) for row in rows] == [("local", "ok")], rows
