"""The collector is off while `route` starts and back on before the command's real work:
through the real `main()`, in a fresh process, for the one command that ends its start-up
itself (ask) and for every other."""

from __future__ import annotations

import os
import subprocess
import sys
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
