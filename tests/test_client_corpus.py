"""The client corpus (tests/data/clients/: request bodies real agents and SDKs sent) replayed
through `route serve` to a loopback upstream that logs what it receives: every body is accepted
(2xx; a stream runs to its end), and what reaches the upstream keeps what the client relies on,
compared field by field with what it sent.

Chat-completions and Responses bodies go to an `openai`-kind backend; Messages and Gemini bodies
to an `anthropic`-kind one and to an `openai`-kind one. Each fixture and upstream kind is one case;
each comparison is a small named check, so a failure reads "<client> lost <what>". What is
compared: every message's text in order (with its role), tool names, descriptions and schemas,
tool_choice and parallel_tool_calls, tool calls and the results matched to their ids, cache
markers (`cache_control` exactly where the client put it on an anthropic-kind upstream,
`prompt_cache_key` on an openai-kind one), reasoning settings (kept, or translated between
`thinking`, `reasoning_effort` and Responses `reasoning.effort`), signed thinking blocks and
`reasoning_content` sent back, the output limit (`max_completion_tokens` kept as written),
`metadata`, `user` and `service_tier` (issue 29)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from tests.answering import answering
from tests.helpers import ok_chat_answer

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).parent / "data" / "clients"
FIXTURES = sorted(CORPUS.glob("*.json"))
MESSAGES, CHAT, RESPONSES = "/v1/messages", "/v1/chat/completions", "/v1/responses"
GEMINI = "gemini"  # Gemini's paths name the model and the method: /v1beta/models/{model}:{method}


def protocol(path: str) -> str:
    return GEMINI if ":" in path else path
EFFORTS = {"minimal", "low", "medium", "high", "xhigh"}


# -- the upstream: logs each body, answers "ok" in its own protocol --------------------------------


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    return b"".join((f"event: {name}\n".encode() if name else b"") + b"data: "
                    + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"
                    for name, data in events)


def _messages_answer(body: dict[str, Any]) -> httpx.Response:
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model", "m"),
               "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
               "usage": usage}
    if not body.get("stream"):
        return httpx.Response(200, json=message)
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {**message, "content": [], "stop_reason": None}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"})]
    return httpx.Response(200, content=_sse(events), headers={"content-type": "text/event-stream"})


class Upstream:
    """What reached the model server: each request's path and body."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.base_url = ""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.received.append((request.url.path, dict(request.headers), body))
        return _messages_answer(body) if request.url.path.endswith("/messages") else ok_chat_answer(body)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    logged = Upstream()
    with answering(logged) as base_url:
        logged.base_url = base_url
        yield logged


@pytest.fixture(scope="module")
def route(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RouteServer]]:
    """`route serve` in front of an upstream of each kind, shared by the cases (with a private
    ROUTE_HOME of its own, as the per-test one comes too late for a module's servers)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ROUTE_HOME", str(tmp_path_factory.mktemp("route-home")))
        with route_serve("openai", upstream.base_url) as openai, route_serve("anthropic", upstream.base_url) as anthropic:
            yield {"openai": openai, "anthropic": anthropic}


@contextlib.contextmanager
def route_serve(kind: str, base_url: str) -> Iterator[RouteServer]:
    """`route serve` with one backend of `kind` at `base_url`, the clients' model names aliased to it."""
    backend = {"kind": kind, "model": f"upstream-{kind}", "base_url": base_url, "max_retries": 0, "timeout_s": 20}
    config = {"backends": {"upstream": backend}, "routing": {"tiers": [{"name": "only", "backends": ["upstream"]}]},
              "aliases": {"claude-*": "upstream", "gpt-*": "upstream", "o4-*": "upstream", "corpus-*": "upstream",
                          "gemini-*": "upstream", "*": "upstream"},
              "log": {"enabled": False}}
    with RouteServer(Router(load_config(config), source="server")) as server:
        yield server


# -- what a body says, in one neutral shape -----------------------------------------------------


@dataclass
class Said:
    """A request in protocol-neutral terms: what the checks compare."""

    texts: list[tuple[str, str]] = field(default_factory=list)  # (system|user|assistant, text), in order
    tools: dict[str, tuple[str, Any]] = field(default_factory=dict)  # name -> (description, JSON schema)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (call id, name, arguments)
    results: list[tuple[str, str]] = field(default_factory=list)  # (call id, text)
    tool_choice: Any = None  # auto | required | none | ("tool", name)
    parallel: bool | None = None
    max_tokens: tuple[str, int] | None = None  # (field name, value)


def _role(role: str) -> str:
    return "system" if role == "developer" else role


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw


def _part_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [p.get("text") or p.get("refusal") or "" for p in content or ()
            if p.get("type") in ("text", "input_text", "output_text", "refusal")]


def _max_tokens(body: dict[str, Any], *names: str) -> tuple[str, int] | None:
    return next(((name, body[name]) for name in names if body.get(name) is not None), None)


def read_chat(body: dict[str, Any]) -> Said:
    said = Said(tool_choice=_chat_choice(body.get("tool_choice")), parallel=body.get("parallel_tool_calls"),
                max_tokens=_max_tokens(body, "max_completion_tokens", "max_tokens"))
    for tool in body.get("tools") or ():
        fn = tool.get("function") or {}
        name = fn.get("name") or tool.get("name")  # Codex 0.80 writes the name beside `function` too
        said.tools[name] = (fn.get("description") or "", fn.get("parameters") or {})
    for message in body.get("messages") or ():
        role = _role(message.get("role", ""))
        if role in ("tool", "function"):
            said.results.append((message.get("tool_call_id") or message.get("name"),
                                 "\n".join(_part_texts(message.get("content")))))
            continue
        said.texts += [(role, text) for text in _part_texts(message.get("content")) if text]
        for call in message.get("tool_calls") or ():
            said.calls.append((call["id"], call["function"]["name"], _args(call["function"].get("arguments"))))
    return said


def _chat_choice(choice: Any) -> Any:
    if isinstance(choice, dict):
        return ("tool", (choice.get("function") or {}).get("name") or choice.get("name"))
    return choice


def read_messages(body: dict[str, Any]) -> Said:
    choice = body.get("tool_choice") or {}
    said = Said(tool_choice=_MESSAGES_CHOICES.get(choice.get("type")) or
                (("tool", choice.get("name")) if choice.get("type") == "tool" else None),
                parallel=False if choice.get("disable_parallel_tool_use") else None,
                max_tokens=_max_tokens(body, "max_tokens"))
    for tool in body.get("tools") or ():
        if tool.get("type") in (None, "custom"):
            said.tools[tool["name"]] = (tool.get("description") or "", tool.get("input_schema") or {})
    system = body.get("system")
    said.texts += [("system", text) for text in _part_texts(system) if text]
    for turn in body.get("messages") or ():
        content = turn.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                said.texts.append((turn["role"], block["text"]))
            elif kind == "tool_use":
                said.calls.append((block["id"], block["name"], block.get("input")))
            elif kind == "tool_result":
                said.results.append((block["tool_use_id"], "\n".join(_part_texts(block.get("content")))))
    return said


_MESSAGES_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def read_responses(body: dict[str, Any]) -> Said:
    choice = body.get("tool_choice")
    said = Said(tool_choice=("tool", choice.get("name")) if isinstance(choice, dict) else choice,
                parallel=body.get("parallel_tool_calls"), max_tokens=_max_tokens(body, "max_output_tokens"))
    for tool in _function_tools(body.get("tools") or []):
        said.tools[tool["name"]] = (tool.get("description") or "", tool.get("parameters") or {})
    if body.get("instructions"):
        said.texts.append(("system", body["instructions"]))
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        kind = item.get("type", "message")
        if kind == "message":
            said.texts += [(_role(item["role"]), text) for text in _part_texts(item.get("content")) if text]
        elif kind == "function_call":
            said.calls.append((item["call_id"], item["name"], _args(item.get("arguments"))))
        elif kind == "function_call_output":
            said.results.append((item["call_id"], "\n".join(_part_texts(item.get("output")))))
    return said


def _function_tools(tools: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Function tools, those grouped in Codex's `namespace` tools included; built-in tools
    (web_search...) only a hosted OpenAI model can run, so they are not expected downstream."""
    for tool in tools:
        if tool.get("type") == "function":
            yield tool
        elif tool.get("type") == "namespace":
            yield from _function_tools(tool.get("tools") or [])


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_GEMINI_CHOICES = {"AUTO": "auto", "ANY": "required", "NONE": "none"}


def read_gemini(body: dict[str, Any]) -> Said:
    config = body.get("generationConfig") or {}
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    said = Said(tool_choice=_GEMINI_CHOICES.get(mode or ""),
                max_tokens=("maxOutputTokens", config["maxOutputTokens"]) if config.get("maxOutputTokens") else None)
    for tool in body.get("tools") or ():
        for fn in tool.get("functionDeclarations") or ():
            said.tools[fn["name"]] = (fn.get("description") or "", fn.get("parametersJsonSchema") or fn.get("parameters") or {})
    system = body.get("systemInstruction") or {}
    said.texts += [("system", part["text"]) for part in system.get("parts") or () if part.get("text")]
    for turn in body.get("contents") or ():
        role = "assistant" if turn.get("role") == "model" else "user"
        for part in turn.get("parts") or ():
            if part.get("text") and not part.get("thought"):
                said.texts.append((role, part["text"]))
            elif "functionCall" in part:
                call = part["functionCall"]
                said.calls.append((call.get("id"), call["name"], call.get("args") or {}))
            elif "functionResponse" in part:
                result = part["functionResponse"]
                said.results.append((result.get("id"), _compact(result.get("response") or {})))
    return said


READERS: dict[str, Callable[[dict[str, Any]], Said]] = {CHAT: read_chat, MESSAGES: read_messages,
                                                        RESPONSES: read_responses, GEMINI: read_gemini}


# -- the checks: each says what was lost, or nothing ---------------------------------------------


@dataclass
class Replay:
    """One body sent through `route serve`: what the client sent, and what reached the upstream."""

    path: str  # the client's endpoint
    kind: str  # the upstream backend's kind
    sent: dict[str, Any]
    received: dict[str, Any]
    sent_headers: dict[str, str] = field(default_factory=dict)
    received_headers: dict[str, str] = field(default_factory=dict)

    @property
    def said(self) -> Said:
        return READERS[protocol(self.path)](self.sent)

    @property
    def heard(self) -> Said:
        return read_messages(self.received) if self.kind == "anthropic" else read_chat(self.received)

    @property
    def anthropic_both_ends(self) -> bool:
        return self.path == MESSAGES and self.kind == "anthropic"


def _short(text: str) -> str:
    return repr(text if len(text) <= 70 else text[:67] + "...")


def texts_in_order(r: Replay) -> list[str]:
    """Every text the client sent, with its role, in its order (texts may be joined, not lost)."""
    got = r.heard.texts
    at, offset = 0, 0
    for n, (role, text) in enumerate(r.said.texts):
        while at < len(got):
            found = got[at][1].find(text, offset) if got[at][0] == role else -1
            if found >= 0:
                offset = found + len(text)
                break
            at, offset = at + 1, 0
        else:
            return [f"text #{n} ({role}) {_short(text)} is missing or out of order"]
    return []


def tools_kept(r: Replay) -> list[str]:
    """Every function tool by name, with its description and JSON schema; no others."""
    wanted, got = r.said.tools, r.heard.tools
    lost = [f"tool {name!r} {'missing' if name not in got else 'changed'}" for name, spec in wanted.items()
            if got.get(name) != spec]
    return lost + [f"tool {name!r} was never sent" for name in got.keys() - wanted.keys()]


def tool_choice_kept(r: Replay) -> list[str]:
    wanted, got = r.said, r.heard
    lost = []
    # with tools offered, no tool_choice means auto in every protocol
    if wanted.tools and (wanted.tool_choice or "auto") != (got.tool_choice or "auto"):
        lost.append(f"tool_choice {wanted.tool_choice!r} arrived as {got.tool_choice!r}")
    if wanted.parallel is not None and wanted.tools and got.parallel != wanted.parallel:
        lost.append(f"parallel tool calls {wanted.parallel} arrived as {got.parallel}")
    return lost


def tool_calls_kept(r: Replay) -> list[str]:
    """The model's earlier tool calls: ids, names and arguments, in order."""
    wanted, got = r.said.calls, r.heard.calls
    return [] if got == wanted else [f"tool calls {wanted} arrived as {got}"]


def tool_results_matched(r: Replay) -> list[str]:
    """Each tool result reaches the upstream under its call's id, its text whole."""
    got = r.heard.results
    return [f"the result of call {call_id!r} ({_short(text)}) is missing or under another id"
            for call_id, text in r.said.results if not any(gid == call_id and text in gtext for gid, gtext in got)]


def _markers(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each cache_control in an Anthropic request: (where, which block, the marker)."""
    def found(where: str, block: dict[str, Any]) -> list[tuple[str, str, str]]:
        if not block.get("cache_control"):
            return []
        which = block.get("text") or block.get("id") or block.get("tool_use_id") or block.get("name") \
            or block.get("signature") or block.get("type")
        return [(where, str(which), json.dumps(block["cache_control"], sort_keys=True))]

    system = body.get("system")
    out = [m for block in (system if isinstance(system, list) else []) for m in found("system", block)]
    out += [m for tool in body.get("tools") or () for m in found("tool", tool)]
    for turn in body.get("messages") or ():
        if isinstance(turn.get("content"), list):
            out += [m for block in turn["content"] for m in found(turn["role"], block)]
    return sorted(out)


def cache_markers_where_sent(r: Replay) -> list[str]:
    """Anthropic to anthropic: every cache_control on the block it was on, and on no other;
    chat and Responses to openai: prompt_cache_key as sent."""
    if r.anthropic_both_ends:
        wanted, got = _markers(r.sent), _markers(r.received)
        lost = [f"cache_control {m[2]} on {m[0]} block {_short(m[1])} is missing" for m in wanted if m not in got]
        return lost + [f"cache_control {m[2]} on {m[0]} block {_short(m[1])} was never sent" for m in got
                       if m not in wanted]
    key = r.sent.get("prompt_cache_key")
    if r.path != MESSAGES and key is not None and r.received.get("prompt_cache_key") != key:
        return [f"prompt_cache_key {key!r} arrived as {r.received.get('prompt_cache_key')!r}"]
    return []


def reasoning_translated(r: Replay) -> list[str]:
    """Reasoning settings as sent, or as their counterpart in the upstream's protocol: thinking
    and output_config.effort (Anthropic), reasoning_effort (chat), reasoning.effort (Responses)."""
    effort = (r.sent.get("output_config") or {}).get("effort")
    if r.anthropic_both_ends:
        off = {"type": "disabled"}  # what no thinking means
        lost = [] if (r.received.get("thinking") or off) == (r.sent.get("thinking") or off) else [
            f"thinking {r.sent.get('thinking')!r} arrived as {r.received.get('thinking')!r}"]
        got = (r.received.get("output_config") or {}).get("effort")
        return lost + ([f"output_config.effort {effort!r} arrived as {got!r}"] if effort != got else [])
    got = r.received.get("reasoning_effort")
    if protocol(r.path) == GEMINI:
        return _gemini_thinking(r, got)
    if r.path == MESSAGES:
        thinking = (r.sent.get("thinking") or {}).get("type")
        if effort in EFFORTS and thinking != "disabled" and got != effort:
            return [f"output_config.effort {effort!r} arrived as reasoning_effort {got!r}"]
        if thinking in ("enabled", "adaptive") and got not in EFFORTS:
            return [f"thinking {r.sent['thinking']!r} arrived as reasoning_effort {got!r}"]
        return []
    wanted = r.sent.get("reasoning_effort") if r.path == CHAT else (r.sent.get("reasoning") or {}).get("effort")
    return [f"reasoning effort {wanted!r} arrived as reasoning_effort {got!r}"] if wanted not in (None, got) else []


def _gemini_thinking(r: Replay, effort: Any) -> list[str]:
    """A thinking budget arrives as reasoning_effort, or to an anthropic upstream as thinking;
    where the last turn answers calls whose signed thinking is gone (Gemini's clients cannot send
    it back), the anthropic kind turns thinking off rather than be refused (docs/reference/fields.md)."""
    budget = ((r.sent.get("generationConfig") or {}).get("thinkingConfig") or {}).get("thinkingBudget")
    if not budget or budget <= 0:
        return []
    if r.kind != "anthropic":
        return [] if effort in EFFORTS else [f"thinkingBudget {budget} arrived as reasoning_effort {effort!r}"]
    thinking = r.received.get("thinking") or {}
    last = (r.sent.get("contents") or [{}])[-1]
    answers_calls = any("functionResponse" in part for part in last.get("parts") or ())
    wanted = ("disabled", None) if answers_calls else ("enabled",)
    return [] if thinking.get("type") in wanted else [f"thinkingBudget {budget} arrived as thinking {thinking!r}"]


def reasoning_sent_back_kept(r: Replay) -> list[str]:
    """Reasoning the client returns with its history: signed thinking blocks to an Anthropic
    upstream (which refuses a tool-use turn without them while thinking is on), and
    `reasoning_content` on chat messages to an OpenAI-compatible one."""
    def thinking(body: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(b["type"], b.get("signature") or b.get("data"), b.get("thinking")) for t in body.get("messages") or ()
                if isinstance(t.get("content"), list) for b in t["content"]
                if b.get("type") in ("thinking", "redacted_thinking")]

    def reasoning(body: dict[str, Any]) -> list[Any]:
        return [m["reasoning_content"] for m in body.get("messages") or () if m.get("reasoning_content")]

    if r.anthropic_both_ends and thinking(r.received) != thinking(r.sent):
        return [f"{len(thinking(r.sent))} thinking blocks sent, {len(thinking(r.received))} arrived as sent"]
    if r.path == CHAT and reasoning(r.received) != reasoning(r.sent):
        return [f"reasoning_content on {len(reasoning(r.sent))} messages sent, {len(reasoning(r.received))} arrived"]
    return []


def _schema_asked(r: Replay) -> Any:
    if r.path == MESSAGES:
        fmt = (r.sent.get("output_config") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None
    if r.path == RESPONSES:
        fmt = (r.sent.get("text") or {}).get("format") or {}
        return fmt.get("schema") if fmt.get("type") == "json_schema" else None
    fmt = r.sent.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None


def structured_output_kept(r: Replay) -> list[str]:
    """A JSON schema the answer must follow (Anthropic output_config.format, chat response_format,
    Responses text.format) reaches the upstream in its protocol's shape."""
    schema = _schema_asked(r)
    if schema is None:
        return []
    if r.kind == "anthropic":
        got = ((r.received.get("output_config") or {}).get("format") or {}).get("schema")
    else:
        got = ((r.received.get("response_format") or {}).get("json_schema") or {}).get("schema")
    return [] if got == schema else [f"the output JSON schema arrived as {got!r}"]


def output_limit_kept(r: Replay) -> list[str]:
    """The output limit's value; from chat to chat also its name (max_completion_tokens stays so)."""
    wanted = r.said.max_tokens
    if wanted is None:
        return []
    got = _max_tokens(r.received, "max_completion_tokens", "max_tokens")
    same = got == wanted if r.path == CHAT else got is not None and got[1] == wanted[1]
    return [] if same else [f"{wanted[0]}={wanted[1]} arrived as {got}"]


def account_fields_kept(r: Replay) -> list[str]:
    """metadata, user and service_tier; to an OpenAI-compatible upstream Anthropic's
    metadata.user_id is `user` (or `safety_identifier`)."""
    if r.path == MESSAGES and r.kind == "openai":
        user_id = (r.sent.get("metadata") or {}).get("user_id")
        if user_id and user_id not in (r.received.get("user"), r.received.get("safety_identifier"),
                                       (r.received.get("metadata") or {}).get("user_id")):
            return [f"metadata.user_id {_short(user_id)} did not arrive as user"]
        return []
    return [f"{name} {r.sent[name]!r} arrived as {r.received.get(name)!r}" for name in ("metadata", "user", "service_tier")
            if name in r.sent and r.received.get(name) != r.sent[name]]


def betas_kept(r: Replay) -> list[str]:
    """Anthropic to anthropic: the betas the client asked for (interleaved thinking, 1M context,
    mid-conversation system turns...) in the upstream's anthropic-beta header."""
    def betas(headers: dict[str, str]) -> set[str]:
        value = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
        return {b.strip() for b in value.split(",") if b.strip()}

    missing = betas(r.sent_headers) - betas(r.received_headers) if r.anthropic_both_ends else set()
    return [f"anthropic-beta {sorted(missing)} did not arrive"] if missing else []


CHECKS: list[Callable[[Replay], list[str]]] = [
    texts_in_order, tools_kept, tool_choice_kept, tool_calls_kept, tool_results_matched, cache_markers_where_sent,
    reasoning_translated, reasoning_sent_back_kept, structured_output_kept, output_limit_kept, account_fields_kept,
    betas_kept]


def lost(r: Replay) -> list[str]:
    return [f"{check.__name__}: {problem}" for check in CHECKS for problem in check(r)]


# -- the replay ----------------------------------------------------------------------------------


def _events(text: str) -> list[tuple[str | None, str]]:
    events, name = [], None
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            events.append((name, line[5:].strip()))
            name = None
    return events


def stream_finished(path: str, text: str) -> str | None:
    """None when a streamed answer ran to its protocol's last event; else what went wrong."""
    events = _events(text)
    if not events:
        return "no events"
    if any(name == "error" or '"error"' in data[:40] for name, data in events):
        return f"an error event: {text[-300:]}"
    name, data = events[-1]
    if protocol(path) == GEMINI:  # the last response says why the answer ended
        return None if '"finishReason"' in data else f"ends with {data[:80]!r}, not a finishReason"
    last = {CHAT: "[DONE]", MESSAGES: "message_stop", RESPONSES: "response.completed"}[path]
    return None if last in (name, data) else f"ends with {name or data[:80]!r}, not {last!r}"


CASES = [pytest.param(fixture, kind, id=f"{fixture.stem}@{kind}") for fixture in FIXTURES
         for kind in (("anthropic", "openai") if protocol(json.loads(fixture.read_text())["path"]) in (MESSAGES, GEMINI)
                      else ("openai",))]


def test_the_corpus_has_every_client_and_protocol():
    records = [json.loads(f.read_text()) for f in FIXTURES]
    clients = {r["client"].split()[0] for r in records}
    assert {"claude-code", "codex", "opencode", "aider", "openai-agents", "langchain-openai", "langchain-anthropic",
            "pydantic-ai", "openai-python", "anthropic-python", "gemini-cli"} <= clients
    assert {protocol(r["path"]) for r in records} == {CHAT, MESSAGES, RESPONSES, GEMINI}
    assert all(set(r) >= {"client", "recorded", "path", "headers", "body"} for r in records)


@pytest.mark.integration
@pytest.mark.integration
@pytest.mark.parametrize(("fixture", "kind"), CASES)
def test_a_recorded_body_is_accepted_and_forwarded_whole(fixture: Path, kind: str, upstream: Upstream,
                                                         route: dict[str, RouteServer]):
    record = json.loads(fixture.read_text())
    path, sent = record["path"], record["body"]
    upstream.received.clear()
    query = f"?{record['query']}" if record.get("query") else ""
    reply = httpx.post(route[kind].url + path + query, json=sent, headers=record["headers"], timeout=30)
    where = f"{record['client']} ({fixture.stem}) to an {kind}-kind upstream"
    assert reply.is_success, f"{where}: {reply.status_code} {reply.text[:500]}"
    if sent.get("stream") or path.endswith(":streamGenerateContent"):
        problem = stream_finished(path, reply.text)
        assert problem is None, f"{where}: the stream did not finish: {problem}"
    assert len(upstream.received) == 1, f"{where}: {len(upstream.received)} upstream requests"
    _, headers, received = upstream.received[0]
    missing = lost(Replay(path, kind, sent, received, record["headers"], headers))
    assert not missing, f"{where} lost:\n  " + "\n  ".join(missing)


# -- the checks themselves: silent when nothing is lost, and naming what is -------------------------


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"{name}.json").read_text())


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if protocol(json.loads(f.read_text())["path"]) in (CHAT, MESSAGES)],
                         ids=lambda f: f.stem)
def test_the_checks_find_nothing_lost_when_a_body_arrives_as_sent(fixture: Path):
    record = json.loads(fixture.read_text())
    kind = "anthropic" if record["path"] == MESSAGES else "openai"
    body = record["body"]
    assert lost(Replay(record["path"], kind, body, json.loads(json.dumps(body)), record["headers"], record["headers"])) == []


def _without(body: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in json.loads(json.dumps(body)).items() if k not in names}


def test_the_checks_name_what_a_chat_body_lost():
    sent = _fixture("openai-python-chat-tool-round-trip")["body"]
    received = _without(sent, "prompt_cache_key", "reasoning_effort", "max_completion_tokens", "user")
    received["max_tokens"] = sent["max_completion_tokens"]
    received["messages"] = [sent["messages"][1], sent["messages"][0], *sent["messages"][2:]]
    received["messages"][-1] = {**received["messages"][-1], "tool_call_id": "call_other"}
    received["tools"] = [{**sent["tools"][0], "function": {**sent["tools"][0]["function"], "parameters": {}}}]
    problems = lost(Replay(CHAT, "openai", sent, received))
    assert [p.split(":")[0] for p in problems] == [
        "texts_in_order", "tools_kept", "tool_results_matched", "cache_markers_where_sent", "reasoning_translated",
        "output_limit_kept", "account_fields_kept"]
    assert "text #1 (user) 'What is the weather in Paris right now?' is missing or out of order" in problems[0]
    assert "max_completion_tokens=2048 arrived as ('max_tokens', 2048)" in problems[5]


def test_the_checks_name_a_cache_marker_moved_or_dropped():
    record = _fixture("anthropic-python-cache-thinking-tool-round-trip")
    sent = record["body"]
    received = json.loads(json.dumps(sent))
    del received["tools"][0]["cache_control"]
    received["system"] = [{"type": "text", "text": sent["system"][0]["text"]}]
    received["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}  # a block it was not on
    problems = lost(Replay(MESSAGES, "anthropic", sent, received, record["headers"], record["headers"]))
    assert problems == [
        "cache_markers_where_sent: cache_control {\"type\": \"ephemeral\"} on system block "
        "'You are a concise weather assistant. Use the tool for every weather...' is missing",
        "cache_markers_where_sent: cache_control {\"ttl\": \"1h\", \"type\": \"ephemeral\"} on tool block 'get_weather' is missing",
        "cache_markers_where_sent: cache_control {\"type\": \"ephemeral\"} on user block "
        "'What is the weather in Paris right now?' was never sent"]


def test_the_checks_translate_between_protocols():
    """A Responses body and a Messages body against the chat body a faithful translation gives."""
    sent = _fixture("openai-python-responses-tool-round-trip")["body"]
    call = sent["input"][2]
    faithful = {"model": "m", "stream": True, "messages": [
        {"role": "system", "content": sent["instructions"]}, {"role": "user", "content": sent["input"][0]["content"]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["call_id"], "type": "function", "function": {
            "name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": sent["input"][3]["output"]}],
        "tools": [{"type": "function", "function": {k: sent["tools"][0][k] for k in ("name", "description", "parameters")}}],
        "tool_choice": "auto", "parallel_tool_calls": False, "reasoning_effort": "low", "max_completion_tokens": 2048,
        "prompt_cache_key": sent["prompt_cache_key"], "metadata": sent["metadata"], "service_tier": "auto"}
    assert lost(Replay(RESPONSES, "openai", sent, faithful)) == []
    assert [p.split(":")[0] for p in lost(Replay(RESPONSES, "openai", sent, _without(faithful, "reasoning_effort")))] == [
        "reasoning_translated"]
    claude = _fixture("claude-code-sonnet-thinking-tool-round-trip")["body"]
    as_chat = {"messages": [], "reasoning_effort": "medium", "user": claude["metadata"]["user_id"]}
    assert {p.split(":")[0] for p in lost(Replay(MESSAGES, "openai", claude, as_chat))} == {
        "texts_in_order", "tools_kept", "tool_calls_kept", "tool_results_matched", "output_limit_kept"}
