"""The library clients' sessions behind the corpus: each runs one agent turn against the recorder
(record.py serve) -- a system prompt, a tool, the model's call of it, the tool's result sent
back, streamed where the client streams, with the reasoning and caching options the library
offers -- so the recorder saves what the library really sends. Run by hand (README.md here):

    python tests/data/clients/sessions.py http://127.0.0.1:8765 openai-chat

Needs the libraries (openai, anthropic, openai-agents, pydantic-ai-slim[openai,anthropic],
langchain-openai, langchain-anthropic); none of this runs in tests.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

SYSTEM = "You are a concise weather assistant. Use the tool for every weather question."
QUESTION = "What is the weather in Paris right now?"
KEY = "sk-corpus-dummy-key-0000000000"


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"Sunny, 21 C in {city}"


WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                  "required": ["city"], "additionalProperties": False}


def openai_chat(base: str) -> None:
    """openai SDK, chat completions: streamed, with caching, reasoning and account fields set."""
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": get_weather.__doc__,
                                               "parameters": WEATHER_SCHEMA, "strict": True}}]
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    options: dict[str, Any] = dict(model="gpt-5-mini", tools=tools, tool_choice="auto", stream=True,
                                   stream_options={"include_usage": True}, reasoning_effort="low",
                                   max_completion_tokens=2048, prompt_cache_key="weather-agent-v1",
                                   metadata={"app": "corpus", "turn": "1"}, user="user-1234",
                                   service_tier="auto", parallel_tool_calls=False, store=False)
    calls: dict[int, dict[str, Any]] = {}
    for chunk in client.chat.completions.create(messages=messages, **options):
        for tc in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            slot = calls.setdefault(tc.index, {"id": tc.id, "type": "function", "function": {"name": "", "arguments": ""}})
            slot["function"]["name"] += tc.function.name or ""
            slot["function"]["arguments"] += tc.function.arguments or ""
    messages.append({"role": "assistant", "content": None, "tool_calls": list(calls.values())})
    for call in calls.values():
        messages.append({"role": "tool", "tool_call_id": call["id"],
                         "content": get_weather(**json.loads(call["function"]["arguments"]))})
    for _ in client.chat.completions.create(messages=messages, **options):
        pass


def openai_responses(base: str) -> None:
    """openai SDK, Responses: streamed, stateless (store false, reasoning sent back encrypted)."""
    import openai

    client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    tools = [{"type": "function", "name": "get_weather", "description": get_weather.__doc__,
              "parameters": WEATHER_SCHEMA, "strict": True}]
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    options: dict[str, Any] = dict(model="gpt-5-mini", instructions=SYSTEM, tools=tools, tool_choice="auto",
                                   reasoning={"effort": "low", "summary": "auto"}, store=False,
                                   include=["reasoning.encrypted_content"], prompt_cache_key="weather-agent-v1",
                                   max_output_tokens=2048, metadata={"app": "corpus"}, service_tier="auto",
                                   parallel_tool_calls=False)
    with client.responses.stream(input=items, **options) as stream:
        final = stream.get_final_response()
    for item in final.output:
        items.append(item.model_dump(exclude_none=True))
        if item.type == "function_call":
            items.append({"type": "function_call_output", "call_id": item.call_id,
                          "output": get_weather(**json.loads(item.arguments))})
    with client.responses.stream(input=items, **options) as stream:
        stream.get_final_response()


def anthropic_messages(base: str) -> None:
    """anthropic SDK: streamed, cache_control on system, tools and the last turn, thinking on."""
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "get_weather", "description": get_weather.__doc__, "input_schema": WEATHER_SCHEMA,
              "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": QUESTION,
                                                          "cache_control": {"type": "ephemeral"}}]}]
    options: dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=8192, system=system, tools=tools,
                                   tool_choice={"type": "auto"}, thinking={"type": "enabled", "budget_tokens": 2048},
                                   metadata={"user_id": "user-1234"}, service_tier="auto")
    with client.messages.stream(messages=messages, **options) as stream:
        final = stream.get_final_message()
    messages[0]["content"][0].pop("cache_control")  # the marker moves to the newest turn, as agents do
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]})
    results = [{"type": "tool_result", "tool_use_id": b.id, "content": get_weather(**b.input),
                "cache_control": {"type": "ephemeral"}} for b in final.content if b.type == "tool_use"]
    messages.append({"role": "user", "content": results})
    with client.messages.stream(messages=messages, **options) as stream:
        stream.get_final_message()


def _agent(model: Any, settings: Any) -> Any:
    from agents import Agent, function_tool

    return Agent(name="weather", instructions=SYSTEM, model=model, model_settings=settings,
                 tools=[function_tool(get_weather)])


def _run_agent(agent: Any) -> None:
    from agents import Runner

    async def run() -> None:
        result = Runner.run_streamed(agent, QUESTION)
        async for _ in result.stream_events():
            pass

    asyncio.run(run())


def agents_chat(base: str) -> None:
    """OpenAI Agents SDK with its chat-completions model, streamed."""
    import openai
    from agents import ModelSettings, OpenAIChatCompletionsModel, set_tracing_disabled
    from openai.types.shared import Reasoning

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    settings = ModelSettings(reasoning=Reasoning(effort="low"), max_tokens=2048, metadata={"app": "corpus"},
                             include_usage=True, parallel_tool_calls=False,
                             extra_args={"prompt_cache_key": "weather-agent-v1"})
    _run_agent(_agent(OpenAIChatCompletionsModel("gpt-5-mini", client), settings))


def agents_responses(base: str) -> None:
    """OpenAI Agents SDK with its Responses model, streamed."""
    import openai
    from agents import ModelSettings, OpenAIResponsesModel, set_tracing_disabled
    from openai.types.shared import Reasoning

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    settings = ModelSettings(reasoning=Reasoning(effort="low", summary="auto"), max_tokens=2048, store=False,
                             metadata={"app": "corpus"}, response_include=["reasoning.encrypted_content"],
                             extra_args={"prompt_cache_key": "weather-agent-v1"})
    _run_agent(_agent(OpenAIResponsesModel("gpt-5-mini", client), settings))


def _langchain_turn(model: Any) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool

    weather = tool(get_weather)
    bound = model.bind_tools([weather])
    messages: list[Any] = [SystemMessage(SYSTEM), HumanMessage(QUESTION)]
    answer = None
    for chunk in bound.stream(messages):
        answer = chunk if answer is None else answer + chunk
    messages.append(answer)
    for call in answer.tool_calls:
        messages.append(ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"]))
    for _ in bound.stream(messages):
        pass


def langchain_openai(base: str) -> None:
    """langchain-openai ChatOpenAI (chat completions), streamed."""
    from langchain_openai import ChatOpenAI

    _langchain_turn(ChatOpenAI(model="gpt-5-mini", base_url=f"{base}/v1", api_key=KEY, max_retries=0,
                               reasoning_effort="low", max_completion_tokens=2048, stream_usage=True,
                               model_kwargs={"prompt_cache_key": "weather-agent-v1", "user": "user-1234"}))


def langchain_openai_responses(base: str) -> None:
    """langchain-openai ChatOpenAI on the Responses API, streamed."""
    from langchain_openai import ChatOpenAI

    _langchain_turn(ChatOpenAI(model="gpt-5-mini", base_url=f"{base}/v1", api_key=KEY, max_retries=0,
                               use_responses_api=True, reasoning={"effort": "low", "summary": "auto"},
                               max_completion_tokens=2048, store=False,
                               include=["reasoning.encrypted_content"],
                               model_kwargs={"prompt_cache_key": "weather-agent-v1"}))


def langchain_anthropic(base: str) -> None:
    """langchain-anthropic ChatAnthropic, streamed, thinking on."""
    from langchain_anthropic import ChatAnthropic

    _langchain_turn(ChatAnthropic(model="claude-sonnet-4-5", base_url=base, api_key=KEY, max_retries=0,
                                  max_tokens=8192, thinking={"type": "enabled", "budget_tokens": 2048}))


def _pydantic_agent(model: Any, settings: Any) -> None:
    from pydantic_ai import Agent

    agent = Agent(model, instructions=SYSTEM, model_settings=settings, tools=[get_weather])

    async def drain(ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    # run_stream would stop at the text before the tool call; run() with a handler streams every step
    asyncio.run(agent.run(QUESTION, event_stream_handler=drain))


def pydantic_ai_openai(base: str) -> None:
    """pydantic-ai OpenAIChatModel, streamed, with caching and reasoning settings."""
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("gpt-5-mini", provider=OpenAIProvider(base_url=f"{base}/v1", api_key=KEY))
    _pydantic_agent(model, OpenAIChatModelSettings(openai_reasoning_effort="low", openai_prompt_cache_key="weather-agent-v1",
                                                   openai_user="user-1234", max_tokens=2048))


def pydantic_ai_responses(base: str) -> None:
    """pydantic-ai OpenAIResponsesModel, streamed."""
    from pydantic_ai.models.openai import OpenAIResponsesModel, OpenAIResponsesModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("gpt-5-mini", provider=OpenAIProvider(base_url=f"{base}/v1", api_key=KEY))
    _pydantic_agent(model, OpenAIResponsesModelSettings(openai_reasoning_effort="low", openai_reasoning_summary="auto",
                                                        openai_prompt_cache_key="weather-agent-v1", max_tokens=2048))


def pydantic_ai_anthropic(base: str) -> None:
    """pydantic-ai AnthropicModel, streamed, with its cache and thinking settings."""
    from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(base_url=base, api_key=KEY))
    _pydantic_agent(model, AnthropicModelSettings(anthropic_thinking={"type": "enabled", "budget_tokens": 2048},
                                                  anthropic_cache_instructions=True, anthropic_cache_tool_definitions=True,
                                                  anthropic_cache_messages=True, anthropic_metadata={"user_id": "user-1234"},
                                                  max_tokens=8192))


SESSIONS: dict[str, Callable[[str], None]] = {
    "openai-chat": openai_chat, "openai-responses": openai_responses, "anthropic-messages": anthropic_messages,
    "agents-chat": agents_chat, "agents-responses": agents_responses, "langchain-openai": langchain_openai,
    "langchain-openai-responses": langchain_openai_responses, "langchain-anthropic": langchain_anthropic,
    "pydantic-ai-openai": pydantic_ai_openai, "pydantic-ai-responses": pydantic_ai_responses,
    "pydantic-ai-anthropic": pydantic_ai_anthropic,
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in SESSIONS:
        sys.exit(f"usage: sessions.py BASE_URL {{{','.join(SESSIONS)}}}")
    SESSIONS[sys.argv[2]](sys.argv[1].rstrip("/"))
