"""`route chat` at a real terminal: the installed console script in a tmux pane, typed at as a
person would, against the simulated server; then `route log` and `route --continue` in
subprocesses, and a word that is a command elsewhere asked about at a terminal.

The config routes by length (tests/helpers.py: short prompts `local`, tier `cheap`; long ones
`hosted`, tier `strong`). The failure signal is structural: every answer is capped at 20
tokens; `sim-local` writes 40, so its answer is cut at the limit (finish_reason "length"), and
the session escalates on the next turn; `sim-hosted` writes 10, within it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import cli_config

pytestmark = pytest.mark.integration  # a terminal, subprocesses, the simulated server

ROUTE = str(Path(sys.executable).parent / "route")
_WAIT_S = 60.0  # for the pane to show what a step waits for: a bound on a hang, not a timing claim


class Pane:
    """One tmux session on a socket of its own, running `command`; kept open when it ends."""

    def __init__(self, tmp_path: Path, command: str):
        if shutil.which("tmux") is None:
            pytest.fail("tmux is not installed: `apt-get install tmux` (.ci/run installs it)")
        # A server of its own, its socket in a short path (a Unix socket's path has ~100 bytes at most).
        self.home = Path(tempfile.mkdtemp(prefix="route-tmux-"))
        self.socket = str(self.home / "s")
        script = tmp_path / "pane.sh"
        keep = ("PATH", "HOME", "ROUTE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
        exports = "".join(f"export {k}={shlex.quote(os.environ[k])}\n" for k in keep if k in os.environ)
        # The script says how the command ended (tmux may show a pane dead before it has its status);
        # a trap, not an ignored signal, keeps it alive through a Ctrl-C its command was sent and handled.
        script.write_text(f"#!/bin/sh\n{exports}cd {shlex.quote(str(tmp_path))}\ntrap : INT\n{command}\n"
                          'echo "[exited $?]"\n')
        script.chmod(0o755)
        self._tmux("new-session", "-d", "-s", "t", "-x", "250", "-y", "80", str(script), ";",
                   "set-option", "-t", "t", "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True,
                                timeout=30)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def type(self, text: str, *, enter: bool = True) -> None:
        self._tmux("send-keys", "-t", "t", "-l", text)
        if enter:
            self._tmux("send-keys", "-t", "t", "Enter")

    def key(self, name: str) -> None:
        self._tmux("send-keys", "-t", "t", name)

    def screen(self) -> str:
        """Everything the pane has shown, wrapped lines joined."""
        return self._tmux("capture-pane", "-p", "-J", "-t", "t", "-S", "-1000")

    def wait(self, what: str, done: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + _WAIT_S
        while not done(screen := self.screen()):
            assert time.monotonic() < deadline, f"waited for {what}; the pane shows:\n{screen}"
            time.sleep(0.05)
        return screen

    def ended(self) -> int | None:
        """The command's exit status once it has ended, else None."""
        found = re.search(r"^\[exited (\d+)\]$", self.screen(), re.MULTILINE)
        return int(found.group(1)) if found else None

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)
        shutil.rmtree(self.home, ignore_errors=True)


def _turn_lines(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if re.match(r"turn \d+ · ", line)]


def _route(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ROUTE, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def pane(tmp_path):
    made: list[Pane] = []

    def start(command: str) -> Pane:
        made.append(Pane(tmp_path, command))
        return made[-1]

    yield start
    for p in made:
        p.close()


def test_a_chat_escalates_on_evidence_is_logged_and_goes_on_with_continue(sim, tmp_path, pane):
    sim.update_profile("sim-hosted", answer_tokens=10)
    cfg = str(cli_config(tmp_path, sim.base_url))
    term = pane(f"{ROUTE} chat -c {shlex.quote(cfg)} --max-tokens 20")
    term.wait("the banner", lambda s: "routed as one session" in s)
    cid = re.search(r"conversation (chat-[0-9a-f]+)", term.screen()).group(1)

    for n, text in enumerate(["What is a hash map?", "And how does it handle collisions?",
                              "Show me a tiny example in Python."], 1):
        term.type(text)
        term.wait(f"turn {n}'s line", lambda s, n=n: len(_turn_lines(s)) == n)
    first, second, third = _turn_lines(term.screen())
    assert first.startswith("turn 1 · tier 'cheap' · local · ") and "new session" in first
    # sim-local's answer was cut at the token limit: the next turn goes one tier up, on that evidence
    assert second.startswith("turn 2 · tier 'strong' · hosted · ") and "escalated (" in second, second
    # a short follow-up would score `cheap` alone; the session does not move down
    assert third.startswith("turn 3 · tier 'strong' · hosted · ") and "stays up" in third, third
    assert "$0.000000 so far" in first and "$0.000000 so far" not in third  # cost so far counts every turn

    # Ctrl-C stops an answer being written and keeps the chat; the next turn is answered
    sim.update_profile("sim-hosted", ttft_s=600)
    term.type("A slow question")
    deadline = time.monotonic() + _WAIT_S
    while not sim.stats("sim-hosted")["in_flight"]:
        assert time.monotonic() < deadline, term.screen()
        time.sleep(0.02)
    term.key("C-c")
    term.wait("the stopped answer", lambda s: "answer stopped" in s)
    sim.update_profile("sim-hosted", ttft_s=0)
    term.type("!model local")
    term.type("thanks")
    screen = term.wait("the pinned turn", lambda s: len(_turn_lines(s)) == 4)
    assert _turn_lines(screen)[3].startswith("turn 4 · pinned · local · ")

    term.type("exit")
    term.wait("the chat to end", lambda s: term.ended() is not None)
    assert term.ended() == 0
    assert f"route log --cid {cid}" in term.screen() and "Traceback" not in term.screen()

    logged = _route("log", "--cid", cid, "--json", "-c", cfg)
    assert logged.returncode == 0, logged.stderr
    rows = [json.loads(line) for line in reversed(logged.stdout.splitlines())]
    assert [(r["prompt"], r["status"], r["backend"]) for r in rows] == [
        ("What is a hash map?", "ok", "local"), ("And how does it handle collisions?", "ok", "hosted"),
        ("Show me a tiny example in Python.", "ok", "hosted"), ("A slow question", "cancelled", "hosted"),
        ("thanks", "ok", "local")]
    assert rows[1]["decision"]["session"]["escalated"]  # the move is recorded with its signal
    table = _route("log", "--cid", cid, "-c", cfg)
    assert f"conversation {cid}" in table.stdout and "hash map" in table.stdout

    # `route --continue` is the conversation's next turn: its session, at the tier it reached
    went_on = _route("-c", cfg, "--continue", "--json", "ok")
    assert went_on.returncode == 0, went_on.stderr
    answer = json.loads(went_on.stdout)
    assert answer["backend"] == "hosted" and answer["decision"]["tier"] == "strong"
    assert answer["decision"]["reason"].startswith(f"session {cid}")
    assert answer["usage"]["input_tokens"] > rows[-1]["input_tokens"]  # the earlier turns were sent with it
    newest = json.loads(_route("log", "-n", "1", "--json", "-c", cfg).stdout)
    assert newest["session"] == cid and newest["prompt"] == "ok"


def test_route_chat_continue_resumes_in_the_pane(sim, tmp_path, pane):
    cfg = str(cli_config(tmp_path, sim.base_url))
    asked = _route("-c", cfg, "What is a hash map?")
    assert asked.returncode == 0, asked.stderr
    term = pane(f"{ROUTE} chat --continue -c {shlex.quote(cfg)}")
    term.wait("the banner", lambda s: "1 earlier turns" in s)
    term.type("half a line, then Ctrl-C", enter=False)
    term.key("C-c")  # at the prompt: the line is dropped, the chat stays
    term.wait("the line dropped", lambda s: "(exit, quit or Ctrl-D leave)" in s)
    term.type("and in French?")
    term.wait("the turn", lambda s: len(_turn_lines(s)) == 1)
    term.key("C-d")
    term.wait("the chat to end", lambda s: term.ended() is not None)
    assert term.ended() == 0
    rows = [json.loads(line) for line in _route("log", "--json", "-c", cfg).stdout.splitlines()]
    assert [(r["prompt"], r["session"]) for r in rows] == [("and in French?", f"log-{rows[1]['id']}"),
                                                             ("What is a hash map?", None)]


@pytest.mark.parametrize("reply, sent", [("y", True), ("n", False)])
def test_a_word_that_is_a_command_elsewhere_is_asked_about_at_a_terminal(sim, tmp_path, pane, reply, sent):
    cfg = str(cli_config(tmp_path, sim.base_url))
    term = pane(f"{ROUTE} -c {shlex.quote(cfg)} keys")
    term.wait("the question", lambda s: "Send 'keys' to a model as a prompt?" in s)
    assert sim.stats("sim-local")["requests"] == 0
    term.type(reply)
    term.wait("the command to end", lambda s: term.ended() is not None)
    assert term.ended() == (0 if sent else 2)
    assert (sim.stats("sim-local")["requests"] == 1) is sent
    assert ("[simulated sim-local] Re: keys" in term.screen()) is sent


def test_llms_dash_c_says_the_text_was_taken_for_a_config_path(tmp_path):
    result = _route("-c", "and now in French?")
    assert result.returncode == 2 and result.stdout == ""
    assert "-c is --config here" in result.stderr and "'and now in French?' was taken as the path" in result.stderr
    assert "route --continue 'and now in French?'" in result.stderr and "Traceback" not in result.stderr
    # the neighbour: a config that exists and no prompt is the plain "no prompt" of before
    plain = _route("-c", str(cli_config(tmp_path, "http://127.0.0.1:9/v1")))
    assert plain.returncode == 2 and "--config here" not in plain.stderr and "is empty" in plain.stderr


def test_a_chat_typed_ahead_from_a_script_keeps_stdout_for_the_answers(sim, tmp_path):
    cfg = str(cli_config(tmp_path, sim.base_url))
    result = subprocess.run([ROUTE, "chat", "-c", cfg], input="hi\n!multi\nfirst line\nsecond line\n!end\nexit\nnot sent\n",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [line.split(" -- ")[0] for line in result.stdout.splitlines()] == [
        "[simulated sim-local] Re: hi", "[simulated sim-local] Re: first line second line"]
    assert len(_turn_lines(result.stderr)) == 2 and sim.stats("sim-local")["requests"] == 2
    rows = [json.loads(line) for line in _route("log", "--json", "-c", cfg).stdout.splitlines()]
    assert [r["prompt"] for r in rows] == ["first line\nsecond line", "hi"]  # one message of two lines
