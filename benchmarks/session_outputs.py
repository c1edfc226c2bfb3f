"""What real clients sent back after a tool ran, for the sessions benchmark: the tool results of
failing commands, passing ones, polls of a running command, missing files, as each client wrote
them (tests/data/clients/outputs, recorded with record.py's `--script`; its manifest says, for
each result, whether the step really failed -- by the command's real exit status or the client's
own error -- which is what a signal's truth is, never what the router reads).

A session's tool round takes its result from these: a failing step one of the client's recorded
failures, a passing step one of its passing results (a benign output that names an error, a
successful read, a poll). A client with no recordings of its own protocol (the SDKs, whose tool
results are whatever the application returns) shows a failure as plain output: no flag, no
status line -- it can only go unseen.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OUTPUTS", "Recorded", "detector_reading", "recorded_outputs"]

OUTPUTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "clients" / "outputs"
_PROTOCOLS = ("/v1/chat/completions", "/v1/messages", "/v1/responses")


@dataclass
class Recorded:
    """One client's recorded tool results in its own protocol: `failed`, `passed` and `polls`
    (passing results of a poll: the same call again while a command runs), each a raw item."""

    failed: list[dict[str, Any]] = field(default_factory=list)
    passed: list[dict[str, Any]] = field(default_factory=list)
    polls: list[dict[str, Any]] = field(default_factory=list)

    def items(self, raw: dict[str, Any], call_id: str, path: str) -> list[dict[str, Any]]:
        """The request items carrying the recorded result `raw` as the result of `call_id`."""
        item = copy.deepcopy(raw)
        if path == "/v1/messages":
            item["tool_use_id"] = call_id
            return [{"role": "user", "content": [item]}]
        item["call_id" if path == "/v1/responses" else "tool_call_id"] = call_id
        return [item]


def _results(body: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The raw tool results of a recorded request, in order."""
    if path == "/v1/responses":
        return [i for i in body.get("input") or () if isinstance(i, dict) and i.get("type") == "function_call_output"]
    out = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if path == "/v1/messages" and isinstance(content, list):
            out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        elif message.get("role") == "tool":
            out.append(message)
    return out


def recorded_outputs(directory: Path = OUTPUTS) -> dict[tuple[str, str], Recorded]:
    """(client, protocol path) -> its recorded results, by the manifest's truth."""
    manifest = directory / "manifest.json"
    if not manifest.is_file():
        return {}
    found: dict[tuple[str, str], Recorded] = {}
    for entry in json.loads(manifest.read_text())["fixtures"]:
        record = json.loads((directory / entry["fixture"]).read_text())
        if record["path"] not in _PROTOCOLS:
            continue  # Gemini's: the sessions benchmark replays no turns of it (benchmarks/session_harness.py)
        results = _results(record["body"], record["path"])
        if len(results) != len(entry["results"]):
            raise SystemExit(f"{entry['fixture']}: {len(results)} tool results, the manifest says "
                             f"{len(entry['results'])}")
        pool = found.setdefault((record["client"].split(" ")[0], record["path"]), Recorded())
        for raw, truth in zip(results, entry["results"]):
            if truth["failed"]:
                pool.failed.append(raw)
            else:
                (pool.polls if entry["scenario"].startswith("poll") else pool.passed).append(raw)
    return found


def detector_reading(directory: Path = OUTPUTS) -> tuple[int, int, int, int]:
    """(failures read as failed, failures, passing results read as failed, passing results) of
    every recorded tool result, as route serve parses its request and policies/sessions.py reads
    it: the detector on what real clients sent, against the manifest's truth."""
    import orjson

    from backends.types import content_text
    from benchmarks.harness import DIALECTS
    from policies.sessions import tool_failed

    manifest = directory / "manifest.json"
    if not manifest.is_file():
        return 0, 0, 0, 0
    caught = failures = false = passing = 0
    for entry in json.loads(manifest.read_text())["fixtures"]:
        record = json.loads((directory / entry["fixture"]).read_text())
        call = DIALECTS[record["path"]].parse(orjson.dumps(record["body"]))
        results = [m for m in call.messages if m.get("role") == "tool"]
        for message, truth in zip(results, entry["results"], strict=True):
            said = tool_failed(content_text(message.get("content")), message.get("is_error")) is True
            if truth["failed"]:
                failures += 1
                caught += said
            else:
                passing += 1
                false += said
    return caught, failures, false, passing
