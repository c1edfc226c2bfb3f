"""Write manifest.json: per fixture, the scenario, the commands, and per tool result the call that made it
and whether that step really failed (by the command's real exit status, or the client's own error).

    python3 build_manifest.py

Reads the fixtures (the calls, as the client sent them back) from tests/data/clients/outputs
($REC_FIXTURES, where set) and $REC_ROOT/outputs/manifest-parts/*.json (what drive.py scripted: the
command and the truth per result, in order), and writes manifest.json beside the fixtures. Only the
fixtures that have a part are listed: rebuild it after re-recording all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/data/clients, where record.py lies
import record

ROOT = Path(os.environ.get("REC_ROOT") or Path(tempfile.gettempdir()) / "route-rec") / "outputs"
FIXTURES = Path(os.environ.get("REC_FIXTURES") or Path(__file__).resolve().parents[2] / "outputs")

FAIL_PY = "python3 -c \"import sys; print('boom'); sys.exit(1)\""


def calls_and_results(protocol: str, body: dict) -> list[tuple[str, object, str]]:
    """(tool, arguments, result text) for each call in the request, in order."""
    out_calls, out_results = [], []
    if protocol == "anthropic":
        for m in body["messages"]:
            for b in m["content"] if isinstance(m.get("content"), list) else ():
                if b.get("type") == "tool_use":
                    out_calls.append((b["id"], b["name"], b.get("input")))
                elif b.get("type") == "tool_result":
                    out_results.append((b["tool_use_id"], record._text(b.get("content"))))
    elif protocol == "chat":
        for m in body["messages"]:
            for c in m.get("tool_calls") or () if m.get("role") == "assistant" else ():
                out_calls.append((c["id"], c["function"]["name"], record._parsed(c["function"].get("arguments"))))
            if m.get("role") == "tool":
                out_results.append((m.get("tool_call_id"), record._text(m.get("content"))))
    elif protocol == "responses":
        for i in body["input"]:
            if i.get("type") in record.RESPONSES_CALLS:
                out_calls.append((i["call_id"], i["name"], record._parsed(i.get("arguments"))))
            elif str(i.get("type", "")).endswith("_output"):
                out_results.append((i["call_id"], record._text(i.get("output"))))
    else:
        for c in body["contents"]:
            for p in c.get("parts") or ():
                if "functionCall" in p:
                    out_calls.append((p["functionCall"].get("id"), p["functionCall"]["name"], p["functionCall"].get("args")))
                elif "functionResponse" in p:
                    out_results.append((p["functionResponse"].get("id"), record._text(p["functionResponse"].get("response"))))
    assert len(out_calls) == len(out_results), (len(out_calls), len(out_results))
    return [(name, args, text) for (_, name, args), (_, text) in zip(out_calls, out_results)]


def exit_status(command: str, scenario: str, index: int) -> tuple[int | None, str]:
    """The step's real exit status (None where no command finished) and why it is or isn't a failure."""
    if command == "ls /nonexistent-corpus-dir":
        return 2, "exit 2: No such file or directory"
    if command == FAIL_PY:
        return 1, "exit 1 after printing boom"
    if scenario == "benign":
        return 0, "exit 0; the output only mentions a failure or the word error"
    if scenario == "poll":
        return None, "the command is still running; the call started or polled it"
    if scenario == "poll-tmux":
        if index == 0:
            return None, "the command is still running at the no-output timeout"
        return None, "the client's own error: no running command to poll (its pane pool interrupted the command)"
    if scenario == "missing":
        if command.startswith("cat "):
            return 1, "exit 1: cat of a file that does not exist"
        return None, "the client's read tool reports that the file does not exist"
    if command.startswith("cat ") or command == "echo corpus-ok":
        return 0, "exit 0"
    return None, "the client's read tool read the file"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                            epilog=f"parts: {ROOT / 'manifest-parts'}; fixtures and manifest: {FIXTURES}").parse_args()
    parts = sorted((ROOT / "manifest-parts").glob("*.json"))
    if not parts:  # the manifest is a tracked file: do not empty it
        raise SystemExit(f"no manifest parts in {ROOT / 'manifest-parts'} (drive.py writes them): nothing written")
    entries = []
    for part in parts:
        meta = json.loads(part.read_text())
        fixture = json.loads((FIXTURES / meta["fixture"]).read_text())
        pairs = calls_and_results(meta["protocol"], fixture["body"])
        if len(pairs) != len(meta["results"]):
            raise SystemExit(f"{meta['fixture']}: {len(pairs)} results, {len(meta['results'])} scripted")
        results = []
        for index, ((tool, arguments, text), scripted) in enumerate(zip(pairs, meta["results"])):
            command = scripted["command"]
            status, why = exit_status(command, meta["scenario"], index)
            results.append({"tool": tool, "arguments": arguments, "command": command, "exit_status": status,
                            "failed": scripted["failed"], "why": why, "result_starts": text[:160]})
        entries.append({"fixture": meta["fixture"], "client": fixture["client"], "protocol": meta["protocol"],
                        "path": fixture["path"], "scenario": meta["scenario"], "task": meta["task"],
                        "command": "; then ".join(r["command"] for r in results),
                        "note": fixture.get("note"), "results": results})
    manifest = {"about": "Fixtures of what coding-agent CLIs send back after a tool ran, recorded with "
                         "tests/data/clients/record.py serve --script; per tool result in the request, in order, "
                         "whether the step really failed (the command's real exit status, or the client's own "
                         "error: a missing file is a failure, a poll of a running command is not, the benign "
                         "commands are not).",
                "fixtures": entries}
    (FIXTURES / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(entries)} fixtures")


if __name__ == "__main__":
    main()
