"""Record what real LLM clients send, to refresh the corpus in this folder (run by hand, never
in tests or CI: it needs the clients installed, see README.md here).

    python tests/data/clients/record.py serve --port 8765 --out /tmp/rec/claude-code
    ... point a client at http://127.0.0.1:8765 (or .../v1) and run a session ...
    python tests/data/clients/record.py keep /tmp/rec/claude-code/0007-v1-messages.json \\
        --client "claude-code 2.0.0" --name claude-code-tool-round-trip

`serve` answers as the real APIs do -- OpenAI chat completions, Anthropic Messages, OpenAI
Responses and Gemini's generateContent, each plain or as its event stream -- and saves every request (path, headers, body)
as one JSON file under --out. It answers a request that offers tools and holds no tool result
yet with a call of one of them (a shell tool with `echo corpus-ok` where there is one), so an
agent runs a real tool round trip; and with reasoning (a thinking block, `reasoning_content`, a
reasoning item) where the request asks for it, so a client that sends reasoning back shows how.

`serve --script FILE` makes the calls a JSON file lists instead, so a session records what a client
sends back after a given command failed, passed or was polled:

    {"steps": [{"tool": ["Bash", "exec_command"], "arguments": {"command": "ls /nonexistent-corpus-dir"}},
               {"tool": "Bash", "arguments": {"command": "sleep 30", "run_in_background": true}},
               {"tool": "TaskOutput", "arguments": {"task_id": "{id}", "block": false, "timeout": 1000},
                "capture": {"id": "with ID: ([a-z0-9]+)"}, "times": 2}],
     "answer": "The directory does not exist; the sleep is still running."}

A bare list of steps works too. Step N is made where the request offers tools and has N calls in its
history, the last of them answered (so the first request gets step 0, and a retry or a side request
with the same history gets the same step); once the steps are spent, the answer. A step names a
tool, or a list of names of which the first one offered is called, because each client calls its
shell differently. Its `arguments` are fitted to the offered tool's schema (`command` becomes
`cmd` or `commands` where the tool has no `command`, a string becomes an argv list where an array
is wanted, "12" an integer, and required arguments left out get the defaults), since one script
should drive several clients; `per_tool` ({"NAME": {...}}) gives one tool's arguments as they are,
where fitting would guess wrong. `capture` names values to take from the tool results seen so far
(the newest match of a regex's first group) and put in the arguments as `{name}`: the id a client
gave a background command. `times: 2` repeats a step with the very arguments of the call before
it, read from the history, so a poll is made twice with identical arguments.

`keep` writes one saved request as a fixture, `<client>-<scenario>.json` beside this file (or in
`--dir`), with secrets, home directories and user ids replaced by placeholders and only the
headers that matter kept.

Standard library only: this stands in for the providers, so it shares no code with the router.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import re
import shlex
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REASONING = "The user wants a shell command run; I will call the tool, then report."
ANSWER = "Done: the command printed corpus-ok."
SHELL_TOOLS = ("Bash", "bash", "shell", "exec_command", "shell_command", "run_shell", "local_shell", "run_shell_command",
               "run_commands")
# headers a provider reads that are neither secret nor transport
KEPT_HEADERS = ("anthropic-beta", "anthropic-version", "openai-beta", "content-type", "user-agent", "originator",
                "x-stainless-lang", "x-stainless-package-version", "x-app", "anthropic-dangerous-direct-browser-access",
                "x-stainless-helper-method", "x-stainless-helper", "x-goog-api-client")


# -- what to answer -------------------------------------------------------------------------------


def _value(name: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "array":
        item = schema.get("items") or {}
        if name in ("command", "cmd", "argv"):
            return ["bash", "-lc", "echo corpus-ok"]
        if name == "commands":  # Cline's run_commands: a list of whole command lines
            return ["echo corpus-ok"]
        return [_value(name, item)] if item else []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    if kind == "object":
        return _arguments(schema)
    if name in ("command", "cmd", "script"):
        return "echo corpus-ok"
    if name == "description":
        return "Print a marker"
    return "Paris"


def _arguments(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: _value(name, props.get(name) or {}) for name in schema.get("required") or []}


def _pick(tools: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]] | None:
    if not tools:
        return None
    by_name = dict(tools)
    for name in SHELL_TOOLS:
        if name in by_name:
            return name, _arguments(by_name[name])
    name, schema = tools[0]
    return name, _arguments(schema)


def _chat_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for tool in body.get("tools") or ():
        fn = tool.get("function") or tool
        if tool.get("type", "function") == "function" and fn.get("name"):
            out.append((fn["name"], fn.get("parameters") or {}))
    return out


def _anthropic_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(t["name"], t.get("input_schema") or {}) for t in body.get("tools") or ()
            if t.get("type") in (None, "custom") and t.get("name")]


def _responses_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(t["name"], t.get("parameters") or {}) for t in body.get("tools") or ()
            if t.get("type") == "function" and t.get("name")]


def _chat_has_result(body: dict[str, Any]) -> bool:
    return any(m.get("role") in ("tool", "function") for m in body.get("messages") or ())


def _anthropic_has_result(body: dict[str, Any]) -> bool:
    return any(isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
               for m in body.get("messages") or ())


def _responses_has_result(body: dict[str, Any]) -> bool:
    items = body.get("input")
    return isinstance(items, list) and any(str(i.get("type", "")).endswith("_output") for i in items)


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def _ident(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


# -- a script of calls (serve --script) -----------------------------------------------------------

# argument names that mean the same thing in different clients' tools, tried in this order
ALIASES = (("command", "cmd", "commands", "script", "argv"),
           ("file_path", "absolute_path", "path", "filePath", "filepath", "file", "target_file", "paths"),
           ("bash_id", "shell_id", "task_id", "session_id", "id"),
           ("run_in_background", "is_background", "background"))


def _text(content: Any) -> str:
    """A tool result's text, whichever shape the protocol gives it (string, blocks, parts, object)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text", c.get("content", c.get("output", ""))) if isinstance(c, dict) else c)
                         for c in content)
    return "" if content is None else json.dumps(content)


def _coerce(name: str, value: Any, schema: dict[str, Any]) -> Any:
    """A scripted value in the type the offered tool declares: a command line as an argv where an array
    is wanted (and back), an id captured as text as the integer Codex wants."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "array" and isinstance(value, str):
        return ["bash", "-lc", value] if name in ("command", "cmd", "argv") else [value]
    if kind == "string" and isinstance(value, list):
        return value[2] if value[:2] == ["bash", "-lc"] and len(value) == 3 else shlex.join(value)
    if kind in ("integer", "number") and isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    if kind == "boolean" and isinstance(value, str):
        return value.strip().lower() == "true"
    return value


def _fit(arguments: dict[str, Any], schema: dict[str, Any], rename: bool = True) -> dict[str, Any]:
    """A step's arguments as the offered tool's schema takes them: renamed through ALIASES where the tool
    lacks a name, dropped where it has nothing like it, typed, and its other required arguments filled."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        target: str | None = key
        if rename and props and key not in props:
            target = next((a for group in ALIASES if key in group for a in group if a in props), None)
        if target is not None:
            out[target] = _coerce(target, value, props.get(target) or {})
    for name in schema.get("required") or ():
        if name not in out:
            out[name] = _value(name, props.get(name) or {})
    return out


class Script:
    """The calls `serve --script` makes, in order, then the answer; see the module's docstring."""

    def __init__(self, steps: list[dict[str, Any]], answer: str = ANSWER) -> None:
        self.steps: list[dict[str, Any]] = []
        for step in steps:
            self.steps.append(step)
            self.steps += [{"repeat": True}] * (int(step.get("times", 1)) - 1)
        self.answer = answer

    @classmethod
    def load(cls, path: Path) -> Script:
        data = json.loads(path.read_text())
        if isinstance(data, list):
            return cls(data)
        return cls(data["steps"], data.get("answer", ANSWER))

    def turn(self, tools: list[tuple[str, dict[str, Any]]], history: tuple[int, bool, list[str], Any]
             ) -> tuple[str, dict[str, Any]] | None:
        """The call to answer a request with, or None for the answer: `history` is the number of calls
        the request holds, whether the last of them is answered, the results' texts (oldest first) and
        the last call (name, arguments)."""
        calls, answered, results, last = history
        if not tools or (calls and not answered) or calls >= len(self.steps):
            return None
        step, offered = self.steps[calls], dict(tools)
        if step.get("repeat"):
            if last is None or last[0] not in offered:
                print(f"script step {calls}: nothing to repeat", file=sys.stderr, flush=True)
                return None
            picked = last
        else:
            names = step["tool"] if isinstance(step["tool"], list) else [step["tool"]]
            name = next((n for n in names if n in offered), None)
            if name is None:
                print(f"script step {calls}: none of {names} offered (offered: {sorted(offered)})", file=sys.stderr,
                      flush=True)
                return None
            exact = (step.get("per_tool") or {}).get(name)
            raw = self._filled(exact if exact is not None else step.get("arguments") or {}, step, results)
            picked = name, _fit(raw, offered[name], rename=exact is None)
        print(f"script step {calls}: {picked[0]} {json.dumps(picked[1])}", file=sys.stderr, flush=True)
        return picked

    @staticmethod
    def _filled(arguments: dict[str, Any], step: dict[str, Any], results: list[str]) -> dict[str, Any]:
        """`{name}` in string arguments replaced by what the step's `capture` regexes find in the newest
        result that matches; other braces (a shell's `${x}`, awk's `{print}`) left alone."""
        found: dict[str, str] = {}
        for name, pattern in (step.get("capture") or {}).items():
            match = next((m for m in (re.search(pattern, r) for r in reversed(results)) if m), None)
            if match:
                found[name] = match.group(1)
            else:
                print(f"script: nothing in the results matches {pattern!r}", file=sys.stderr, flush=True)

        def fill(value: Any) -> Any:
            if isinstance(value, str):
                return re.sub(r"\{(\w+)\}", lambda m: found.get(m.group(1), m.group(0)), value)
            if isinstance(value, list):
                return [fill(v) for v in value]
            return {k: fill(v) for k, v in value.items()} if isinstance(value, dict) else value

        return fill(arguments)


def _parsed(arguments: Any) -> Any:
    """Chat and Responses carry a call's arguments as JSON text; a repeated step sends them as an object."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


# what Script.turn reads from a request, per protocol: how many calls it holds, whether a result follows the
# last assistant turn (not a new user turn), the results' texts and the last call


def _chat_history(body: dict[str, Any]) -> tuple[int, bool, list[str], Any]:
    msgs = body.get("messages") or []
    calls = [c.get("function") or {} for m in msgs if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    answered = any(m.get("role") in ("tool", "function") for m in msgs[last + 1:])
    results = [_text(m.get("content")) for m in msgs if m.get("role") in ("tool", "function")]
    return len(calls), answered, results, (calls[-1].get("name"), _parsed(calls[-1].get("arguments"))) if calls else None


def _anthropic_history(body: dict[str, Any]) -> tuple[int, bool, list[str], Any]:
    msgs = body.get("messages") or []

    def blocks(m: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        content = m.get("content")
        return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []

    calls = [b for m in msgs if m.get("role") == "assistant" for b in blocks(m, "tool_use")]
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    answered = any(blocks(m, "tool_result") for m in msgs[last + 1:])
    results = [_text(b.get("content")) for m in msgs for b in blocks(m, "tool_result")]
    return len(calls), answered, results, (calls[-1]["name"], calls[-1].get("input")) if calls else None


RESPONSES_CALLS = ("function_call", "custom_tool_call", "local_shell_call")


def _responses_history(body: dict[str, Any]) -> tuple[int, bool, list[str], Any]:
    items: list[dict[str, Any]] = body["input"] if isinstance(body.get("input"), list) else []
    calls = [i for i in items if i.get("type") in RESPONSES_CALLS]
    last = max((n for n, i in enumerate(items) if i.get("type") in RESPONSES_CALLS or i.get("role") == "assistant"),
               default=-1)
    answered = any(str(i.get("type", "")).endswith("_output") for i in items[last + 1:])
    results = [_text(i.get("output")) for i in items if str(i.get("type", "")).endswith("_output")]
    return len(calls), answered, results, (calls[-1].get("name"), _parsed(calls[-1].get("arguments"))) if calls else None


def _gemini_history(body: dict[str, Any]) -> tuple[int, bool, list[str], Any]:
    contents = body.get("contents") or []
    calls = [p["functionCall"] for c in contents if c.get("role") == "model" for p in c.get("parts") or ()
             if "functionCall" in p]
    last = max((i for i, c in enumerate(contents) if c.get("role") == "model"), default=-1)
    answered = any("functionResponse" in p for c in contents[last + 1:] for p in c.get("parts") or ())
    results = [_text(p["functionResponse"].get("response")) for c in contents for p in c.get("parts") or ()
               if "functionResponse" in p]
    return len(calls), answered, results, (calls[-1].get("name"), calls[-1].get("args")) if calls else None


# -- OpenAI chat completions ----------------------------------------------------------------------


def chat(body: dict[str, Any], script: Script | None = None) -> tuple[bytes, str]:
    if script:
        picked = script.turn(_chat_tools(body), _chat_history(body)) if body.get("tool_choice") != "none" else None
    else:
        wants_tool = body.get("tool_choice") != "none" and not _chat_has_result(body)
        picked = _pick(_chat_tools(body)) if wants_tool else None
    text = script.answer if script else ANSWER
    thinks = bool(body.get("reasoning_effort") or body.get("reasoning"))
    model, ident = body.get("model", "model"), _ident("chatcmpl-")
    call = None
    if picked:
        call = {"id": _ident("call_"), "type": "function",
                "function": {"name": picked[0], "arguments": json.dumps(picked[1])}}
    usage = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132,
             "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
    finish = "tool_calls" if call else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": None if call else text}
        if call:
            message["tool_calls"] = [call]
        if thinks:
            message["reasoning_content"] = REASONING
        return json.dumps({"id": ident, "object": "chat.completion", "created": 0, "model": model,
                           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                           "usage": usage}).encode(), "application/json"
    head = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if thinks:
        events.append(chunk({"reasoning_content": REASONING}))
    if call:
        events.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]}))
    else:
        events += [chunk({"content": word}) for word in re.findall(r"\S+\s*", text)]
    events.append(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**head, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return _sse(events), "text/event-stream"


# -- Anthropic Messages ---------------------------------------------------------------------------


def messages(body: dict[str, Any], script: Script | None = None) -> tuple[bytes, str]:
    allowed = (body.get("tool_choice") or {}).get("type") != "none"
    if script:
        picked = script.turn(_anthropic_tools(body), _anthropic_history(body)) if allowed else None
    else:
        picked = _pick(_anthropic_tools(body)) if allowed and not _anthropic_has_result(body) else None
    thinks = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
    blocks: list[dict[str, Any]] = []
    if thinks:
        blocks.append({"type": "thinking", "thinking": REASONING, "signature": "c2lnbmF0dXJlLXBsYWNlaG9sZGVy"})
    if picked:
        blocks.append({"type": "text", "text": "I'll run it."})
        blocks.append({"type": "tool_use", "id": _ident("toolu_"), "name": picked[0], "input": picked[1]})
    else:
        blocks.append({"type": "text", "text": script.answer if script else ANSWER})
    usage = {"input_tokens": 120, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    stop = "tool_use" if picked else "end_turn"
    message = {"id": _ident("msg_"), "type": "message", "role": "assistant", "model": body.get("model", "model"),
               "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        return json.dumps(message).encode(), "application/json"
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                                 "usage": {**usage, "output_tokens": 1}}})]
    for index, block in enumerate(blocks):
        kind = block["type"]
        empty = {"thinking": {"type": "thinking", "thinking": "", "signature": ""},
                 "text": {"type": "text", "text": ""},
                 "tool_use": {**block, "input": {}}}[kind]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}))
        if kind == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        elif kind == "text":
            deltas = [{"type": "text_delta", "text": w} for w in re.findall(r"\S+\s*", block["text"])]
        else:
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 12}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events), "text/event-stream"


# -- OpenAI Responses -----------------------------------------------------------------------------


def _reasoning_item(body: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": _ident("rs_"),
                            "summary": [{"type": "summary_text", "text": REASONING}]}
    if "reasoning.encrypted_content" in (body.get("include") or ()):
        item["encrypted_content"] = "ZW5jcnlwdGVkLXJlYXNvbmluZy1wbGFjZWhvbGRlcg=="
    return item


def _item_events(index: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    def event(name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return name, {"type": name, "output_index": index, **fields}

    kind = item["type"]
    started = {"reasoning": {**item, "summary": []}, "function_call": {**item, "arguments": "", "status": "in_progress"},
               "message": {**item, "content": [], "status": "in_progress"}}[kind]
    out = [event("response.output_item.added", item=started)]
    if kind == "reasoning":
        text = item["summary"][0]["text"]
        part = {"type": "summary_text", "text": ""}
        out += [event("response.reasoning_summary_part.added", item_id=item["id"], summary_index=0, part=part),
                event("response.reasoning_summary_text.delta", item_id=item["id"], summary_index=0, delta=text),
                event("response.reasoning_summary_text.done", item_id=item["id"], summary_index=0, text=text),
                event("response.reasoning_summary_part.done", item_id=item["id"], summary_index=0,
                      part={**part, "text": text})]
    elif kind == "function_call":
        out += [event("response.function_call_arguments.delta", item_id=item["id"], delta=item["arguments"]),
                event("response.function_call_arguments.done", item_id=item["id"], arguments=item["arguments"])]
    else:
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        out.append(event("response.content_part.added", item_id=item["id"], content_index=0, part=part))
        out += [event("response.output_text.delta", item_id=item["id"], content_index=0, delta=w)
                for w in re.findall(r"\S+\s*", text)]
        out += [event("response.output_text.done", item_id=item["id"], content_index=0, text=text),
                event("response.content_part.done", item_id=item["id"], content_index=0, part={**part, "text": text})]
    out.append(event("response.output_item.done", item=item))
    return out


def responses(body: dict[str, Any], script: Script | None = None) -> tuple[bytes, str]:
    if script:
        picked = script.turn(_responses_tools(body), _responses_history(body)) \
            if body.get("tool_choice") != "none" else None
    else:
        wants_tool = body.get("tool_choice") != "none" and not _responses_has_result(body)
        picked = _pick(_responses_tools(body)) if wants_tool else None
    output: list[dict[str, Any]] = [_reasoning_item(body)] if body.get("reasoning") else []
    if picked:
        output.append({"type": "function_call", "id": _ident("fc_"), "call_id": _ident("call_"), "name": picked[0],
                       "arguments": json.dumps(picked[1]), "status": "completed"})
    else:
        output.append({"type": "message", "id": _ident("msg_"), "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": script.answer if script else ANSWER,
                                    "annotations": []}]})
    usage = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 132}
    response = {"id": _ident("resp_"), "object": "response", "created_at": 0, "status": "completed",
                "model": body.get("model", "model"), "output": output, "usage": usage, "error": None,
                "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"),
                "tools": body.get("tools") or []}
    if not body.get("stream"):
        return json.dumps(response).encode(), "application/json"
    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        ("response.in_progress", {"type": "response.in_progress", "response": pending})]
    for index, item in enumerate(output):
        events += _item_events(index, item)
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    counter = itertools.count()
    for _, data in events:
        if isinstance(data, dict):
            data["sequence_number"] = next(counter)
    return _sse(events), "text/event-stream"


# -- Gemini generateContent -----------------------------------------------------------------------


def _gemini_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(d["name"], d.get("parametersJsonSchema") or d.get("parameters") or {})
            for tool in body.get("tools") or () for d in tool.get("functionDeclarations") or () if d.get("name")]


def _gemini_has_result(body: dict[str, Any]) -> bool:
    return any("functionResponse" in part for c in body.get("contents") or () for part in c.get("parts") or ())


def _lowered(schema: Any) -> Any:
    """Gemini's OpenAPI schemas name types in capitals (`OBJECT`): read as JSON Schema."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lowered(v)) for k, v in schema.items()}
    return [_lowered(v) for v in schema] if isinstance(schema, list) else schema


def gemini(path: str, body: dict[str, Any], script: Script | None = None) -> tuple[bytes, str]:
    if path.endswith(":countTokens"):
        return json.dumps({"totalTokens": 120}).encode(), "application/json"
    mode = (((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode") or "AUTO").upper()
    tools = [(n, _lowered(s)) for n, s in _gemini_tools(body)]
    if script:
        picked = script.turn(tools, _gemini_history(body)) if mode != "NONE" else None
    else:
        picked = _pick(tools) if mode != "NONE" and not _gemini_has_result(body) else None
    config = body.get("generationConfig") or {}
    thinks = bool((config.get("thinkingConfig") or {}).get("includeThoughts"))
    parts: list[dict[str, Any]] = [{"text": REASONING, "thought": True}] if thinks else []
    if picked:
        parts.append({"functionCall": {"name": picked[0], "args": picked[1]},
                      "thoughtSignature": "c2lnbmF0dXJlLXBsYWNlaG9sZGVy"})
    elif config.get("responseMimeType") == "application/json":
        parts.append({"text": json.dumps({"reasoning": "The model answered.", "next_speaker": "user"})})
    else:
        parts.append({"text": script.answer if script else ANSWER})
    usage = {"promptTokenCount": 120, "candidatesTokenCount": 12, "totalTokenCount": 132}
    model = path.rsplit("/", 1)[-1].split(":")[0]
    response = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage, "modelVersion": model, "responseId": uuid.uuid4().hex[:20]}
    if ":streamGenerateContent" not in path:
        return json.dumps(response).encode(), "application/json"
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}], "modelVersion": model,
               "responseId": response["responseId"]} for part in parts[:-1]]
    chunks.append({**response, "candidates": [{**response["candidates"][0], "content": {"role": "model",
                                                                                       "parts": parts[-1:]}}]})
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode(), "text/event-stream"


def models() -> bytes:
    names = ["gpt-5", "gpt-4.1", "gpt-4o", "o4-mini", "claude-sonnet-4-5", "claude-haiku-4-5", "corpus-model"]
    return json.dumps({"object": "list", "data": [{"id": n, "object": "model", "type": "model", "created": 0,
                                                  "owned_by": "corpus", "display_name": n} for n in names],
                       "has_more": False, "first_id": names[0], "last_id": names[-1]}).encode()


def answer(path: str, body: dict[str, Any], script: Script | None = None) -> tuple[int, bytes, str]:
    path = path.split("?")[0].rstrip("/")
    if "/models/" in path and ":" in path.rsplit("/", 1)[-1]:  # Gemini: /v1beta/models/NAME:METHOD
        return (200, *gemini(path, body, script))
    if path.endswith("/messages/count_tokens"):
        return 200, json.dumps({"input_tokens": 120}).encode(), "application/json"
    for suffix, handler in (("/chat/completions", chat), ("/messages", messages), ("/responses", responses)):
        if path.endswith(suffix):
            return (200, *handler(body, script))
    return 404, json.dumps({"error": {"message": f"no route for {path}", "type": "not_found"}}).encode(), \
        "application/json"


# -- the server -----------------------------------------------------------------------------------


def _handler(out: Path, script: Script | None = None) -> type[BaseHTTPRequestHandler]:
    counter = itertools.count(1)
    lock = threading.Lock()

    class Recorder(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _save(self, raw: bytes) -> dict[str, Any]:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"_undecodable": raw.decode("utf-8", "replace")}
            with lock:
                n = next(counter)
            slug = re.sub(r"[^a-z0-9]+", "-", self.path.split("?")[0].lower()).strip("-") or "root"
            record = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body,
                      "recorded": datetime.date.today().isoformat()}
            (out / f"{n:04d}-{slug}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))
            print(f"{n:04d} {self.command} {self.path}", file=sys.stderr, flush=True)
            return record

        def _reply(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", _ident("req_"))
            self.send_header("x-request-id", _ident("req_"))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._save(b"")
            if self.path.split("?")[0].rstrip("/").endswith("/models"):
                self._reply(200, models(), "application/json")
            else:
                self._reply(404, b'{"error": {"message": "not found"}}', "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            record = self._save(raw)
            body = record["body"] if isinstance(record["body"], dict) else {}
            self._reply(*answer(self.path, body, script))

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Recorder


def serve(port: int, out: Path, script: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(out, Script.load(script) if script else None))
    print(f"recording to {out} on http://127.0.0.1:{server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()


# -- keeping a recording as a fixture -------------------------------------------------------------

_SECRET = re.compile(r"\b(sk-(ant-)?[A-Za-z0-9_-]{16,})")


def scrub(text: str, replacements: dict[str, str]) -> str:
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    # Claude Code's metadata.user_id holds a device hash: not secret, but personal
    text = re.sub(r"\b[0-9a-f]{64}\b", "0" * 64, text)
    return _SECRET.sub("sk-REDACTED", text)


def keep(recording: Path, client: str, name: str, replace: list[str], note: str | None,
         folder: Path = HERE) -> Path:
    record = json.loads(recording.read_text())
    replacements = dict(r.split("=", 1) for r in replace)
    headers = {k.lower(): v for k, v in record["headers"].items() if k.lower() in KEPT_HEADERS}
    fixture: dict[str, Any] = {"client": client, "recorded": record["recorded"], "path": record["path"].split("?")[0],
                               "headers": headers, "body": record["body"]}
    if "?" in record["path"]:  # Claude Code asks for /v1/messages?beta=true
        fixture["query"] = record["path"].split("?", 1)[1]
    if note:
        fixture["note"] = note
    text = scrub(json.dumps(fixture, indent=1, ensure_ascii=False), replacements)
    target = folder / f"{name}.json"
    target.write_text(text + "\n")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="answer as the providers do and save every request")
    run.add_argument("--port", type=int, default=8765)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--script", type=Path, help="a JSON file of the calls to make, in order, then the answer")
    save = commands.add_parser("keep", help="write one saved request as a fixture beside this file")
    save.add_argument("recording", type=Path)
    save.add_argument("--client", required=True, help='name and version, e.g. "claude-code 2.0.0"')
    save.add_argument("--name", required=True, help="the fixture's file name without .json: CLIENT-SCENARIO")
    save.add_argument("--replace", action="append", default=[], metavar="OLD=NEW",
                      help="a string to replace (a home directory, a user name); repeatable")
    save.add_argument("--note", help="what the fixture shows, or what was shortened")
    save.add_argument("--dir", type=Path, default=HERE, help="where to write it (default: beside this file)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.port, args.out, args.script)
    else:
        print(keep(args.recording, args.client, args.name, args.replace, args.note, args.dir))


if __name__ == "__main__":
    main()
