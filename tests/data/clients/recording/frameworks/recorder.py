"""A thin wrapper around tests/data/clients/record.py (imported, not edited).

    recorder.py serve --port 180NN --out RAWDIR [--replies replies.json] [record.py's own options]
    recorder.py keep RECORDING --client "NAME VERSION" --name FIXTURE [--replace OLD=NEW ...] --note "..."

serve: as record.py serve, but when --replies names a JSON list, the Nth POST to a completion
endpoint (chat/completions, messages, responses) is answered with the Nth entry as the
assistant's plain text (for frameworks that write their tool calls as text: ReAct prompts,
smolagents' CodeAgent, dspy's adapters); an entry {"tool": NAME, "arguments": {...}} (NAME ending in * for a prefix of the
offered tool's name) is answered
(chat completions only) with that native tool call, for frameworks that send tool results back in a
shape record.py does not count as a result (smolagents' ToolCallingAgent). An entry of null, or the list running out, falls back to
record.py's own answer (a native tool call when tools are offered, else its fixed answer).

keep: as record.py keep; without --dir it writes the fixture into $REC_FIXTURES where that is set,
else into tests/data/clients (beside record.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/data/clients, where record.py lies
import record

FIXTURES = Path(os.environ.get("REC_FIXTURES") or Path(__file__).resolve().parents[2])
_lock = threading.Lock()
_original_answer = record.answer
_default_text = record.ANSWER


def _chat_call(body: dict, name: str, arguments: dict) -> tuple[bytes, str]:
    """A chat completion (plain or streamed) whose message is one call of NAME."""
    call = {"id": record._ident("call_"), "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}
    model, ident = body.get("model", "model"), record._ident("chatcmpl-")
    usage = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}
    if not body.get("stream"):
        return json.dumps({"id": ident, "object": "chat.completion", "created": 0, "model": model,
                           "choices": [{"index": 0, "finish_reason": "tool_calls",
                                        "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
                           "usage": usage}).encode(), "application/json"
    head = {"id": ident, "object": "chat.completion.chunk", "created": 0, "model": model}
    deltas = [({"role": "assistant", "content": None}, None),
              ({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                "function": {"name": name, "arguments": ""}}]}, None),
              ({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]}, None),
              ({}, "tool_calls")]
    events = [(None, {**head, "choices": [{"index": 0, "delta": d, "finish_reason": f}]}) for d, f in deltas]
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append((None, {**head, "choices": [], "usage": usage}))
    events.append((None, "[DONE]"))
    return record._sse(events), "text/event-stream"


def _scripted(replies: list[str | None]):
    state = {"n": 0}

    def answer(path: str, body: dict, *rest):
        bare = path.split("?")[0].rstrip("/")
        completion = any(bare.endswith(s) for s in ("/chat/completions", "/messages", "/responses"))
        with _lock:
            if completion:
                n = state["n"]
                state["n"] += 1
                reply = replies[n] if n < len(replies) else None
                print(f"  scripted reply #{n}: {'default' if reply is None else repr(reply)[:70]}",
                      file=sys.stderr, flush=True)
            else:
                reply = None
            if isinstance(reply, dict):
                name = reply["tool"]
                if name.endswith("*"):  # a prefix: a tool whose name the framework makes per run
                    offered = [n for n, _ in record._chat_tools(body)]
                    name = next((n for n in offered if n.startswith(name[:-1])), name[:-1])
                return 200, *_chat_call(body, name, reply.get("arguments") or {})
            if reply is None:
                record.ANSWER = _default_text
                return _original_answer(path, body, *rest)
            # a text answer: hide any tools from record.py so it answers with text, not a call
            record.ANSWER = reply
            try:
                return _original_answer(path, {**body, "tools": []})  # and no record.py script
            finally:
                record.ANSWER = _default_text

    return answer


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] == "serve" and "--replies" in argv:
        i = argv.index("--replies")
        replies = json.loads(Path(argv[i + 1]).read_text())
        del argv[i:i + 2]
        record.answer = _scripted(replies)
    if argv and argv[0] == "keep":
        FIXTURES.mkdir(parents=True, exist_ok=True)
        if "--dir" not in argv:
            argv += ["--dir", str(FIXTURES)]
    record.main(argv)


if __name__ == "__main__":
    main()
