"""Wrapper around tests/data/clients/record.py (not edited):
- `keep` writes into $REC_FIXTURES where that is set, else beside record.py (tests/data/clients);
- `serve` also recognises the shell tools of clients record.py does not know by name;
- a tool with `language` (enum with shell) and `code` arguments is called with shell / `echo corpus-ok`
  (Open Interpreter), `shell_command` is `echo corpus-ok` (shell-gpt), `summary` and `riskLevelReason`
  say "Print a marker" (Factory Droid);
- with REC_WHOLE_TOOL_CALL=1, a streamed chat tool call comes in one chunk (id, name and arguments
  together, as Mistral's API sends it) rather than two: the Mistral SDK rejects a chunk without a name."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/data/clients, where record.py lies
import record

record.HERE = Path(os.environ.get("REC_FIXTURES") or record.HERE)  # keep's default --dir; keep.sh also passes --dir
record.SHELL_TOOLS = record.SHELL_TOOLS + (
    "Shell",            # Kimi CLI
    "Execute",          # Factory Droid
    "ShellCommand",     # Letta Code
    "run_command", "execute_command", "execute_shell_command", "shell_exec", "execute_bash", "terminal",
    "execute", "exec", "bash_tool", "run_terminal_cmd", "run_shell_cmd", "shell_command_tool",
)

_value = record._value


def _value_more(name, schema):
    """Open Interpreter's `execute(language, code)`, shell-gpt's `execute_shell_command(shell_command)`."""
    if name == "language" and "shell" in (schema.get("enum") or ()):
        return "shell"
    if name in ("code", "shell_command"):  # shell_command: shell-gpt's execute_shell_command
        return "echo corpus-ok"
    if name in ("summary", "riskLevelReason"):  # Factory Droid's Execute
        return "Print a marker"
    return _value(name, schema)


record._value = _value_more

_chat = record.chat


def chat(body, *args, **kwargs):
    data, kind = _chat(body, *args, **kwargs)
    if kind != "text/event-stream" or not os.environ.get("REC_WHOLE_TOOL_CALL"):
        return data, kind
    events, merged = [], None
    for block in data.decode().split("\n\n"):
        if not block.startswith("data: ") or block == "data: [DONE]":
            if block:
                events.append(block)
            continue
        chunk = json.loads(block[6:])
        calls = (chunk.get("choices") or [{}])[0].get("delta", {}).get("tool_calls") if chunk.get("choices") else None
        if calls and merged is None:
            merged = chunk
            events.append(None)  # placeholder
        elif calls:
            merged["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] += calls[0]["function"]["arguments"]
        else:
            events.append(block)
    out = [("data: " + json.dumps(merged)) if e is None else e for e in events]
    return ("\n\n".join(out) + "\n\n").encode(), kind


record.chat = chat

if __name__ == "__main__":
    record.main()
