"""A recorded client's harness around any task: the request bodies a client would send, in its
own protocol, with the task's words where the recorded user's words were.

Each fixture in tests/data/clients is one real request of an agent or SDK after a tool ran (see
its README). What the client adds around the user's words -- system prompt, tool schemas,
AGENTS.md and environment messages, reminders, aider's format rules, cache markers, thinking
settings -- is kept as recorded; the recorded prompt is replaced by a task, and the recorded
answer (the model's tool call and its result) becomes the template of every tool round trip:
cloned with a fresh call id, its result one the client was recorded sending for a step of that
kind (benchmarks/session_outputs.py), or, for a client with none, the recorded result with a new
output. Later user turns clone the task's own content block, so a client that wraps
every turn (aider's format rules) wraps them too, and one that adds reminders to the first turn
only (Claude Code) does not. Every body is parsed by the server's own dialect
(router/server/protocols/) into the messages `route serve` would route.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from backends.types import Completion, content_text
from benchmarks.session_outputs import Recorded, recorded_outputs
from router.server.protocols.base import Call, Dialect
from router.server.protocols.chat import ChatDialect
from router.server.protocols.messages import MessagesDialect
from router.server.protocols.responses import ResponsesDialect

__all__ = ["CORPUS", "Harness", "harnesses"]

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "clients"
# What the recorded sessions asked and what their tool printed (tests/data/clients/README.md).
RECORDED_PROMPTS = ("Run the shell command 'echo corpus-ok' and tell me what it printed.",
                    "What is the weather in Paris right now?", "Make greet() say hello instead of hi.")
RECORDED_OUTPUTS = ("Sunny, 21 C in Paris", "corpus-ok")
_ARGUMENTS = ("corpus-ok", "Paris")  # what the recorded calls' arguments name: varied per step
# Claude Code's session-title side request is not an agent loop: it is left out.
SIDE_REQUESTS = frozenset({"claude-code-title"})
_SENTINEL = "@@ROUTE-BENCHMARK-TASK@@"
_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "/v1/chat/completions": ChatDialect, "/v1/messages": MessagesDialect, "/v1/responses": ResponsesDialect}


def _replace(value: Any, old: str, new: str) -> Any:
    """`value` with `old` replaced by `new` in every string, JSON held in a string included."""
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, str) and old in value:
        if value.lstrip().startswith("{"):
            try:
                return json.dumps(_replace(json.loads(value), old, new), separators=(",", ":"))
            except ValueError:
                pass
        return value.replace(old, new)
    return value


def _is_answer(item: dict[str, Any]) -> bool:
    return item.get("role") == "assistant" or item.get("type") in ("function_call", "reasoning")


def _is_result(item: dict[str, Any]) -> bool:
    if item.get("role") == "tool" or item.get("type") == "function_call_output":
        return True
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


@dataclass
class Harness:
    """One recorded client. `items_key`: where its conversation lies (`messages` or `input`);
    `prefix`: what comes before the user's task; `task_item`: the task's turn, the prompt a
    sentinel; `trailer`: what the client put after it (aider moves it after every new turn);
    `answer`/`result`: the recorded tool call and its result, templates of every round trip."""

    name: str
    client: str
    path: str
    body: dict[str, Any]
    items_key: str
    prefix: list[dict[str, Any]]
    task_item: dict[str, Any]
    trailer: list[dict[str, Any]]
    answer: list[dict[str, Any]]
    result: list[dict[str, Any]]
    call_id: str | None
    output: str | None
    tool: dict[str, str] | None  # the recorded call's name and arguments
    answer_text: str  # what the recorded model said beside its call ("" when nothing)
    dialect: Dialect = field(repr=False, default_factory=ChatDialect)
    recorded: Recorded | None = field(repr=False, default=None)  # its real tool results (benchmarks/session_outputs.py)

    @property
    def polls(self) -> bool:
        """Whether this client was recorded polling a running command (the same call again)."""
        return self.recorded is not None and bool(self.recorded.polls)

    @property
    def protocol(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def moves_trailer(self) -> bool:
        return self.client.startswith("aider")

    def parse(self, items: list[dict[str, Any]]) -> Call:
        """The call `route serve` would make of a request with this conversation."""
        return self.dialect.parse(orjson.dumps({**self.body, self.items_key: self.prefix + items}))

    def first_turn(self, task: str) -> list[dict[str, Any]]:
        return [_replace(self.task_item, _SENTINEL, task), *self.trailer]

    def user_turn(self, text: str) -> dict[str, Any]:
        """A later user turn as this client writes one: the task's block (and the wrapping in it)."""
        item = copy.deepcopy(self.task_item)
        content = item.get("content")
        if isinstance(content, list):
            item["content"] = [b for b in content if _SENTINEL in json.dumps(b)]
        return _replace(item, _SENTINEL, text)

    def with_user_turn(self, items: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
        if not self.moves_trailer or not self.trailer:
            return [*items, self.user_turn(text)]
        kept = [i for i in items if not any(i is t for t in self.trailer)]
        return [*kept, self.user_turn(text), *self.trailer]

    def tool_round(self, call_id: str, output: str, *, error: bool, step: int = 0, poll: bool = False,
                   pick: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The model's call (as recorded, under `call_id`; its arguments those of step `step`: an
        agent's successive calls differ, a stuck model's and a poll repeat) and the client's
        result: one of its recorded results of that kind (`pick` chooses; a failing one for
        `error`, a poll's for `poll`) where it was recorded, else the recorded result carrying
        `output` as plain output (the SDKs: what the application returns)."""
        assert self.call_id is not None and self.output is not None
        answer = _replace(self.answer, self.call_id, call_id)
        if step:
            for marker in _ARGUMENTS:
                answer = _replace(answer, marker, f"{marker}-{step}")
        recorded = self.recorded
        if recorded is not None and pick is not None:
            pool = recorded.failed if error else recorded.polls if poll else recorded.passed
            if pool:
                return [*answer, *recorded.items(pick(pool), call_id, self.path)]
        return [*answer, *_replace(_replace(self.result, self.call_id, call_id), self.output, output)]

    def text_answer(self, completion: Completion) -> dict[str, Any]:
        """The model's text answer as this client sends it back."""
        text = completion.text
        if self.protocol == "messages":
            return {"role": "assistant", "content": [{"type": "text", "text": text}]}
        if self.protocol == "responses":
            return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        return {"role": "assistant", "content": text}


def _task_at(items: list[dict[str, Any]]) -> tuple[str, int] | None:
    """The recorded prompt, and the index of the item that holds it."""
    for i, item in enumerate(items):
        text = json.dumps(item, ensure_ascii=False)
        prompt = next((p for p in RECORDED_PROMPTS if p in text), None)
        if prompt is not None:
            return prompt, i
    return None


def _load(path: Path) -> Harness | None:
    record = json.loads(path.read_text())
    if record["path"] not in _DIALECTS:  # Gemini's protocol: its turns are not replayed here
        return None
    body, dialect = record["body"], _DIALECTS[record["path"]]()
    items_key = "messages" if "messages" in body else "input"
    items: list[dict[str, Any]] = body[items_key]
    found = _task_at(items)
    if found is None:
        return None
    prompt, start = found
    end, first_result = _answer_span(items, start)
    # the tool results alone: a second-turn recording goes on with the model's text and the
    # user's next turn, which a tool round must not carry into every later request
    last_result = next((i for i in range(first_result, len(items)) if not _is_result(items[i])), len(items))
    tool, call_id, output, said = _recorded_call(dialect.parse(orjson.dumps(body)))
    if tool is not None and output is None:  # a recorded failure (cline-chat-tool-error): no loop to clone
        return None
    if tool is None and body.get("tools"):  # a first call that offers tools: its loop is in another recording
        return None
    if prompt in json.dumps([items[:start], items[start + 1:last_result]], ensure_ascii=False) or any(
            o in json.dumps(items[start], ensure_ascii=False) for o in RECORDED_OUTPUTS if o not in prompt):
        return None  # the task told again, or its loop written into its own turn (a ReAct trajectory): no first turn
    return Harness(
        name=path.stem, client=record["client"], path=record["path"], body={k: v for k, v in body.items() if k != items_key},
        items_key=items_key, prefix=items[:start], task_item=_replace(items[start], prompt, _SENTINEL),
        trailer=items[start + 1:end], answer=items[end:first_result], result=items[first_result:last_result],
        call_id=call_id, output=output, tool=tool, answer_text=said, dialect=dialect)


def _answer_span(items: list[dict[str, Any]], start: int) -> tuple[int, int]:
    """Where the recorded answer to the task begins, and where its tool results begin (both
    len(items) when there is none)."""
    end = next((i for i in range(start + 1, len(items)) if _is_answer(items[i])), len(items))
    return end, next((i for i in range(end, len(items)) if _is_result(items[i])), len(items))


def _said(message: dict[str, Any]) -> str:
    content = message.get("content")
    return "" if content in (None, "null") else content_text(content)


def _recorded_call(call: Call) -> tuple[dict[str, str] | None, str | None, str | None, str]:
    """The recorded tool call (name, arguments), its id, the output its result carried, and
    the text the model said beside it."""
    asked = [m for m in call.messages if m.get("role") == "assistant" and m.get("tool_calls")]
    shown = [content_text(m.get("content")) for m in call.messages if m.get("role") == "tool"]
    if not asked or not shown:
        return None, None, None, ""
    first = asked[0]["tool_calls"][0]
    output = next((o for o in RECORDED_OUTPUTS if o in shown[0]), None)
    return dict(first["function"]), str(first["id"]), output, _said(asked[0])


def harnesses(directory: Path = CORPUS) -> list[Harness]:
    """Every recorded agent or SDK loop in `directory`, by file name, each with the tool results
    its client was recorded sending (benchmarks/session_outputs.py), where it was."""
    outputs = recorded_outputs()
    loaded = [h for h in (_load(p) for p in sorted(directory.glob("*.json")) if p.stem not in SIDE_REQUESTS)
              if h is not None]
    for harness in loaded:
        harness.recorded = outputs.get((harness.client.split(" ")[0], harness.path))
    return loaded
