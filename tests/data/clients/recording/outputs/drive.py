"""Drive one client through one scripted scenario against record.py, and keep the fixture.

    python3 drive.py CLIENT SCENARIO [--port N] [--no-keep]

Scratch folders lie under $REC_ROOT/outputs (REC_ROOT defaults to route-rec in the system temp
folder). Each run gets a fresh scratch git repo (work/CLIENT-SCENARIO), a fresh HOME
(home/CLIENT-SCENARIO) and a fresh recording folder (raw/CLIENT-SCENARIO); the script record.py
follows is written to scripts/CLIENT-SCENARIO.json, the logs to logs/. The clients are looked for
in npm/ (one npm prefix), venv-mini/ and venv-oh/ there. After the client exits, the first request
holding every scripted result, the last one answered, is kept as CLIENT-PROTOCOL-output-SCENARIO.json
in tests/data/clients/outputs ($REC_FIXTURES, where set), its manifest entry in manifest-parts/.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/data/clients, where record.py lies
import record

RECORD = Path(__file__).resolve().parents[2] / "record.py"
ROOT = Path(os.environ.get("REC_ROOT") or Path(tempfile.gettempdir()) / "route-rec") / "outputs"
FIXTURES = Path(os.environ.get("REC_FIXTURES") or RECORD.parent / "outputs")
NPM = ROOT / "npm/node_modules"

SHELL = ["Bash", "bash", "shell", "exec_command", "shell_command", "run_shell_command", "run_commands", "terminal",
         "execute_command"]
READ = ["Read", "read_file", "read", "read_files", "file_editor", "view"]
FAIL_PY = "python3 -c \"import sys; print('boom'); sys.exit(1)\""
BENIGN_1 = "printf 'attempt 1 exited with code 1\\nretrying\\nattempt 2: ok\\n'"
BENIGN_2 = "printf 'tests/test_errors.py::test_error_message PASSED\\n1 passed\\n'"
POLL_CMD = "echo started; sleep 25; echo finished"
POLL_CMD_LONG = "echo started; sleep 150; echo finished"

PROTOCOL = {"claude-code": "anthropic", "codex": "responses", "gemini-cli": "gemini", "opencode": "chat",
            "qwen-code": "chat", "cline": "chat", "continue-cli": "chat", "mini-swe-agent": "chat",
            "openhands": "chat"}


def shell(command: str, **extra) -> dict:
    return {"tool": SHELL, "arguments": {"command": command, "description": "Run the command", **extra},
            "per_tool": {"terminal": {"command": command, "security_risk": "LOW", **extra.get("terminal", {})}}}


def read(path: str) -> dict:
    """The client's file-read tool; where it has none (Codex, mini-swe-agent), `cat` in its shell."""
    return {"tool": READ + SHELL, "arguments": {"file_path": path},
            "per_tool": {"file_editor": {"command": "view", "path": path, "security_risk": "LOW"},
                         "read_files": {"files": [{"path": path}]},
                         "exec_command": {"cmd": f"cat {path}"}, "bash": {"command": f"cat {path}"}}}


def poll_steps(client: str) -> list[dict]:
    """The background start and the poll, as each client that has them names them."""
    if client == "claude-code":
        return [{"tool": "Bash", "arguments": {"command": POLL_CMD, "description": "Start it in the background",
                                               "run_in_background": True}},
                {"tool": ["BashOutput", "TaskOutput"], "per_tool": {"BashOutput": {"bash_id": "{id}"},
                                                                     "TaskOutput": {"task_id": "{id}", "block": False,
                                                                                    "timeout": 1000}},
                 "capture": {"id": r"ID: ([A-Za-z0-9_-]+)"}, "times": 2}]
    if client == "codex":
        return [{"tool": "exec_command", "per_tool": {"exec_command": {"cmd": POLL_CMD, "yield_time_ms": 1000}}},
                {"tool": "write_stdin", "per_tool": {"write_stdin": {"session_id": "{id}", "chars": "",
                                                                     "yield_time_ms": 1000}},
                 "capture": {"id": r"session ID (\d+)"}, "times": 2}]
    if client == "gemini-cli":
        return [{"tool": "run_shell_command", "arguments": {"command": POLL_CMD, "description": "Start it in the background",
                                                            "is_background": True}},
                {"tool": "read_background_output", "arguments": {"pid": "{id}"},
                 "capture": {"id": r"(?i)PID:?\s*(\d+)"}, "times": 2}]
    if client == "openhands":
        # its terminal gives a command back with exit code -1 at the timeout, still running; an empty
        # command with is_input polls it
        # (its soft timeout is 10 s without new output, so this one sleeps longer)
        return [{"tool": "terminal", "per_tool": {"terminal": {"command": POLL_CMD_LONG, "security_risk": "LOW"}}},
                {"tool": "terminal", "per_tool": {"terminal": {"command": "", "is_input": True,
                                                               "security_risk": "LOW"}}, "times": 2}]
    raise SystemExit(f"no poll tool known for {client}")


def scenario(client: str, name: str, work: Path) -> tuple[str, list[dict], str, list[bool], list[str]]:
    """(task, steps, answer, truth per tool result, command per tool result)."""
    if name == "fail":
        return (f"Run the shell command `ls /nonexistent-corpus-dir`, then the shell command `{FAIL_PY}`, "
                "and tell me what each printed.",
                [shell("ls /nonexistent-corpus-dir"), shell(FAIL_PY)],
                "The first command failed: the directory does not exist. The second printed boom and exited 1.",
                [True, True], ["ls /nonexistent-corpus-dir", FAIL_PY])
    if name == "benign":
        return (f"Run the shell command `{BENIGN_1}`, then the shell command `{BENIGN_2}`, "
                "and tell me what each printed.",
                [shell(BENIGN_1), shell(BENIGN_2)],
                "Both ran fine: the first retried and succeeded, the second shows one passing test.",
                [False, False], [BENIGN_1, BENIGN_2])
    if name == "poll-tmux":  # OpenHands with tmux installed: its pane pool interrupts the command between calls
        return (f"Start the shell command `{POLL_CMD_LONG}`, and when it stops printing, check its output twice "
                "and tell me what it printed so far.",
                poll_steps(client), "It printed started and is still running.",
                [False, True, True], [POLL_CMD_LONG + " (soft timeout, still running)", "poll", "poll"])
    if name == "poll":
        command = POLL_CMD_LONG if client == "openhands" else POLL_CMD
        return (f"Start the shell command `{command}` in the background, then check its output twice "
                "and tell me what it printed so far.",
                poll_steps(client), "It printed started and is still running.",
                [False, False, False], [command + " (in the background)", "poll", "poll"])
    if name == "missing":
        path = str(work / "missing-corpus-file.txt")
        return (f"Read the file {path} and tell me what it says.", [read(path)],
                "That file does not exist.", [True], [f"cat {path}" if client in NO_READ_TOOL else f"read {path}"])
    if name == "success":
        path = str(work / "README.md")
        return (f"Read the file {path}, then run the shell command `echo corpus-ok`, and tell me what you saw.",
                [read(path), shell("echo corpus-ok")],
                "The README says this is a scratch project; the command printed corpus-ok.",
                [False, False], [f"cat {path}" if client in NO_READ_TOOL else f"read {path}", "echo corpus-ok"])
    raise SystemExit(f"unknown scenario {name}")


NO_READ_TOOL = ("codex", "mini-swe-agent")


def mini_submit(steps: list[dict]) -> list[dict]:
    """mini-swe-agent ends only on a command whose output starts with its marker, not on a text answer."""
    return steps + [{"tool": ["bash"], "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}]


def setup(client: str, work: Path, home: Path, port: int, scenario_name: str) -> tuple[list[str], dict[str, str]]:
    """The command line and the environment that point CLIENT at the recorder."""
    base = f"http://127.0.0.1:{port}"
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
           "USER": "user", "SHELL": "/bin/bash", "TMPDIR": str(home / "tmp")}
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    if client == "claude-code":
        env |= {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "sk-ant-dummy", "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        return [str(NPM / "@anthropic-ai/claude-code-linux-x64/claude"), "-p", "{task}", "--allowedTools",
                "Bash,Read,BashOutput,TaskOutput"], env
    if client == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5"\nmodel_provider = "corpus"\nmodel_reasoning_effort = "medium"\n\n'
            f'[model_providers.corpus]\nname = "corpus"\nbase_url = "{base}/v1"\nwire_api = "responses"\n'
            'env_key = "CORPUS_API_KEY"\n')
        env |= {"CODEX_HOME": str(codex_home), "CORPUS_API_KEY": "sk-dummy"}
        return [str(NPM / ".bin/codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "{task}"], env
    if client == "gemini-cli":
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini/settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        env |= {"GOOGLE_GEMINI_BASE_URL": base, "GEMINI_API_KEY": "dummy", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
        return [str(NPM / ".bin/gemini"), "-m", "gemini-2.5-pro", "--yolo", "-p", "{task}"], env
    if client == "opencode":
        conf = home / ".config/opencode"
        conf.mkdir(parents=True)
        (conf / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json", "model": "corpus/gpt-4.1",
            "permission": {"bash": "allow", "edit": "allow", "read": "allow", "external_directory": "allow"},
            "provider": {"corpus": {"npm": "@ai-sdk/openai-compatible", "name": "corpus",
                                    "options": {"baseURL": f"{base}/v1", "apiKey": "sk-dummy"},
                                    "models": {"gpt-4.1": {"name": "gpt-4.1"}}}}}, indent=1))
        env |= {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        return [str(NPM / "opencode-linux-x64/bin/opencode"), "run", "{task}"], env
    if client == "qwen-code":
        return [str(NPM / ".bin/qwen"), "--auth-type", "openai", "--openai-base-url", f"{base}/v1",
                "--openai-api-key", "sk-dummy", "-m", "gpt-4.1", "--yolo", "-p", "{task}"], env
    if client == "cline":
        return [str(NPM / ".bin/cline"), "--json", "-c", str(work), "-t", "100", "{task}"], env
    if client == "continue-cli":
        config = home / "continue.yaml"
        config.write_text(f"name: corpus\nversion: 0.0.1\nschema: v1\nmodels:\n  - name: gpt-4.1\n"
                          f"    provider: openai\n    model: gpt-4.1\n    apiKey: sk-dummy\n    apiBase: {base}/v1\n"
                          "    roles: [chat, edit, apply]\n")
        return [str(NPM / ".bin/cn"), "--config", str(config), "--auto", "-p", "{task}"], env
    if client == "mini-swe-agent":
        env |= {"OPENAI_API_KEY": "sk-dummy", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "MSWEA_CONFIGURED": "true",
                "MSWEA_MODEL_NAME": "openai/gpt-4.1"}
        return [str(ROOT / "venv-mini/bin/mini"), "-y", "--exit-immediately", "-m", "openai/gpt-4.1",
                "-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={base}/v1", "-c", "agent.step_limit=6",
                "-c", "agent.cost_limit=0", "-t", "{task}"], env
    if client == "openhands":
        if scenario_name == "poll":
            # without tmux OpenHands keeps one shell session, whose timed-out command an empty command polls;
            # with tmux (poll-tmux) each call checks out a pane from a pool and interrupts what ran there
            (home / "bin").mkdir()
            (home / "bin/tmux").write_text("#!/bin/sh\nexit 127\n")
            (home / "bin/tmux").chmod(0o755)
            env["PATH"] = f"{home / 'bin'}:{env['PATH']}"
        env |= {"LLM_MODEL": "openai/gpt-4.1", "LLM_BASE_URL": f"{base}/v1", "LLM_API_KEY": "sk-dummy"}
        return [str(ROOT / "venv-oh/bin/openhands"), "--headless", "--override-with-envs",
                "--exit-without-confirmation", "-t", "{task}"], env
    raise SystemExit(f"unknown client {client}")


def pre(client: str, work: Path, home: Path, port: int, env: dict[str, str]) -> None:
    """Steps a client needs before its run (Cline keeps its provider in its own store)."""
    if client == "cline":
        subprocess.run([str(NPM / ".bin/cline"), "auth", "-p", "openai", "-k", "sk-dummy", "-m", "gpt-4.1",
                        "-b", f"http://127.0.0.1:{port}/v1"], cwd=work, env=env, timeout=60, check=False)


HISTORY = {"chat": record._chat_history, "anthropic": record._anthropic_history,
           "responses": record._responses_history, "gemini": record._gemini_history}


def kept_request(raw: Path, protocol: str, results: int) -> Path | None:
    """The first saved request that holds every scripted result, the last call answered."""
    for path in sorted(raw.glob("*.json")):
        body = json.loads(path.read_text()).get("body")
        if not isinstance(body, dict):
            continue
        if protocol == "gemini" and "contents" not in body or protocol == "responses" and "input" not in body:
            continue
        calls, answered, found, _ = HISTORY[protocol](body)
        if answered and len(found) >= results:
            return path
    return None


def version(client: str) -> str:
    npm = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini-cli": "@google/gemini-cli",
           "opencode": "opencode-ai", "qwen-code": "@qwen-code/qwen-code", "cline": "cline",
           "continue-cli": "@continuedev/cli"}
    if client in npm:
        return json.loads((NPM / npm[client] / "package.json").read_text())["version"]
    venv, dist = {"mini-swe-agent": ("venv-mini", "mini-swe-agent"), "openhands": ("venv-oh", "openhands")}[client]
    out = subprocess.run([str(ROOT / venv / "bin/python"), "-c",
                          f"import importlib.metadata as m; print(m.version('{dist}'))"], capture_output=True, text=True)
    return out.stdout.strip()


NAMES = {"claude-code": "claude-code", "codex": "codex", "gemini-cli": "gemini-cli", "opencode": "opencode",
         "qwen-code": "qwen-code", "cline": "cline", "continue-cli": "continue-cli", "mini-swe-agent": "mini-swe-agent",
         "openhands": "openhands"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client")
    parser.add_argument("scenario")
    parser.add_argument("--port", type=int, default=18210)
    parser.add_argument("--timeout", type=int, default=240)
    parser.add_argument("--no-keep", action="store_true", help="record only")
    parser.add_argument("--keep-only", action="store_true", help="keep from the recording already made")
    parser.add_argument("--print", action="store_true", help="set up, then print the commands instead of running")
    args = parser.parse_args()
    tag = f"{args.client}-{args.scenario}"
    work, home, raw = ROOT / "work" / tag, ROOT / "home" / tag, ROOT / "raw" / tag
    task, steps, answer, truth, commands = scenario(args.client, args.scenario, work)
    if not args.keep_only:
        run_session(args, tag, work, home, raw, task, steps, answer)
    if args.print:
        return
    keep_fixture(args, tag, work, home, raw, task, truth, commands)


def run_session(args, tag: str, work: Path, home: Path, raw: Path, task: str, steps: list[dict], answer: str) -> None:
    """A fresh scratch repo, HOME and recording; the recorder with the script; the client, once."""
    if args.print:
        print_session(args, tag, work, home, raw, task, steps, answer)
        return
    for folder in (work, home, raw):
        shutil.rmtree(folder, ignore_errors=True)
    work.mkdir(parents=True)
    home.mkdir(parents=True)
    (work / "README.md").write_text("# scratch\n\nA scratch project for recording a coding agent.\n")
    (work / "hello.py").write_text('print("hello")\n')
    git = ["git", "-c", "user.name=user", "-c", "user.email=user@example.com"]
    subprocess.run(git[:1] + ["init", "-q"], cwd=work, check=True)
    subprocess.run(git + ["add", "."], cwd=work, check=True)
    subprocess.run(git + ["commit", "-qm", "scratch"], cwd=work, check=True)

    if args.client == "mini-swe-agent":
        steps = mini_submit(steps)
    script = ROOT / "scripts" / f"{tag}.json"
    script.parent.mkdir(exist_ok=True)
    script.write_text(json.dumps({"steps": steps, "answer": answer}, indent=1))
    (ROOT / "logs").mkdir(exist_ok=True)
    server_log = open(ROOT / "logs" / f"{tag}.server.log", "w")
    server = subprocess.Popen([sys.executable, str(RECORD), "serve", "--port", str(args.port), "--out", str(raw),
                               "--script", str(script)], stderr=server_log, stdout=server_log)
    time.sleep(1)
    try:
        argv, env = setup(args.client, work, home, args.port, args.scenario)
        pre(args.client, work, home, args.port, env)
        argv = [task if a == "{task}" else a for a in argv]
        with open(ROOT / "logs" / f"{tag}.client.log", "w") as log:
            try:
                rc = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        print(f"{tag}: client exit {rc}")
    finally:
        server.terminate()
        server.wait()
    print(open(ROOT / "logs" / f"{tag}.server.log").read())


def print_session(args, tag: str, work: Path, home: Path, raw: Path, task: str, steps: list[dict], answer: str) -> None:
    """The commands run_session runs, and the files it writes into HOME, as shell lines (nothing is run)."""
    if args.client == "mini-swe-agent":
        steps = mini_submit(steps)
    script = ROOT / "scripts" / f"{tag}.json"
    print(f"# {tag}: {script} holds\n#   {json.dumps({'steps': steps, 'answer': answer})}")
    print(f"# a fresh git repo {work} (README.md, hello.py, one commit) and an empty HOME {home}")
    with tempfile.TemporaryDirectory() as tmp:
        argv, env = setup(args.client, work, Path(tmp), args.port, args.scenario)
        lines = [f"mkdir -p {tmp}"]
        for path in sorted(Path(tmp).rglob("*")):
            if path.is_dir():
                lines.append(f"mkdir -p {path}")
            else:
                lines.append(f"cat > {path} <<'EOF'\n{path.read_text().rstrip()}\nEOF")
                if os.access(path, os.X_OK):
                    lines.append(f"chmod +x {path}")
        lines.append(shlex.join([sys.executable, str(RECORD), "serve", "--port", str(args.port), "--out", str(raw),
                                 "--script", str(script)]) + " &")
        run_env = " ".join(f'PATH="{v.replace(os.environ["PATH"], "$PATH")}"' if k == "PATH" else shlex.quote(f"{k}={v}")
                           for k, v in env.items())
        if args.client == "cline":
            lines.append(f"(cd {work} && env -i {run_env} {NPM}/.bin/cline auth -p openai -k sk-dummy -m gpt-4.1 "
                         f"-b http://127.0.0.1:{args.port}/v1)")
        argv = [task if a == "{task}" else a for a in argv]
        lines.append(f"(cd {work} && env -i {run_env} {shlex.join(argv)} < /dev/null)")
        lines.append("kill %1")
        print("\n".join(lines).replace(tmp, str(home)))


def keep_fixture(args, tag: str, work: Path, home: Path, raw: Path, task: str, truth: list[bool],
                 commands: list[str]) -> None:
    """The first request that holds every scripted result, as a fixture, and its manifest entry."""
    protocol = PROTOCOL[args.client]
    results = len(truth)
    found = kept_request(raw, protocol, results)
    if found is None:
        print(f"{tag}: no request holds {results} results")
        sys.exit(1)
    print(f"{tag}: keeping {found.name}")
    if args.no_keep:
        return
    name = f"{NAMES[args.client]}-{protocol}-output-{args.scenario}"
    FIXTURES.mkdir(parents=True, exist_ok=True)
    client = f"{args.client} {version(args.client)}"
    no_reader = args.client in NO_READ_TOOL
    key = "poll-openhands" if (args.client, args.scenario) == ("openhands", "poll") else args.scenario
    note = NOTES[key].format(
        client=args.client, poll=POLL_CMD_LONG if args.client == "openhands" else POLL_CMD,
        read="ran `cat` (it has no file-read tool) on" if no_reader else "read, with its file-read tool,",
        missing="exit 1, No such file or directory" if no_reader else "the client reports an error")
    out = subprocess.run([sys.executable, str(RECORD), "keep", str(found), "--client", client, "--name", name,
                          f"--replace={work}=/home/user/project", f"--replace={home}=/home/user",
                          f"--replace={str(work).replace('/', '-')}=-home-user-project",
                          "--replace=/root/.pyenv/=/home/user/.pyenv/",
                          f"--replace={NPM}=/usr/lib/node_modules", f"--replace=../../home/{tag}=..",
                          f"--replace=.gemini/tmp/{tag}=.gemini/tmp/project",
                          "--note", note, "--dir", str(FIXTURES)], capture_output=True, text=True, check=True)
    print(out.stdout.strip())
    manifest_path = ROOT / "manifest-parts" / f"{name}.json"
    manifest_path.parent.mkdir(exist_ok=True)
    manifest_path.write_text(json.dumps({
        "fixture": f"{name}.json", "client": client, "protocol": protocol, "scenario": args.scenario,
        "recording": str(found.relative_to(ROOT)), "task": task.replace(str(work), "/home/user/project"),
        "results": [{"command": c.replace(str(work), "/home/user/project"), "failed": t}
                    for c, t in zip(commands, truth)]}, indent=1))


NOTES = {
    "fail": "{client} ran `ls /nonexistent-corpus-dir` (exit 2, 'No such file or directory' on stderr) and then "
            "`python3 -c \"import sys; print('boom'); sys.exit(1)\"` (prints boom, exit 1): both results are failures",
    "benign": "{client} ran two commands that exit 0: a printf of 'attempt 1 exited with code 1 / retrying / "
              "attempt 2: ok' and a printf of 'tests/test_errors.py::test_error_message PASSED / 1 passed': "
              "no failure, though the output names one",
    "poll": "{client} started `{poll}` in the background (still running), then "
            "polled it twice with identical arguments: no failure",
    "poll-openhands": "{client} (tmux hidden, so one shell session) ran `{poll}`, which hit the terminal's 30 s "
                      "no-output timeout still running, then polled it twice with an identical empty command "
                      "(is_input): both polls show it still running: no failure",
    "poll-tmux": "{client} (tmux installed) ran `{poll}`, which hit the terminal's 30 s no-output timeout still "
                 "running (not a failure), then polled it twice with an empty command: the pane pool had interrupted "
                 "it, and both polls report an error ('No previous running command')",
    "missing": "{client} {read} /home/user/project/missing-corpus-file.txt, which does not exist: {missing}",
    "success": "{client} {read} /home/user/project/README.md (exists) and ran `echo corpus-ok` (exit 0): both succeed",
}

if __name__ == "__main__":
    main()
