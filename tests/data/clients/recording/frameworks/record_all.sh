#!/usr/bin/env bash
# Re-records every framework session and re-keeps its fixtures (ports 18001-18012): raw requests,
# logs, scratch HOMEs and working directories under $REC_ROOT/frameworks (REC_ROOT defaults to
# $TMPDIR/route-rec), fixtures into tests/data/clients (or $REC_FIXTURES).
# Venvs (python 3.12) in $REC_ROOT/frameworks/venvs/NAME, as installed:
#   dspy: dspy | llamaindex: llama-index-core llama-index-llms-openai-like | lcreact: "langchain<1.0" "langchain-openai<1.0"
#   crewai: crewai | smolagents: "smolagents[openai]" | autogen: autogen-agentchat "autogen-ext[openai]"
#   haystack: haystack-ai | agno: agno openai | semantickernel: semantic-kernel | mirascope: "mirascope[openai]"
#   marvin: marvin "pydantic-ai<1.90" (3.2.7 breaks on newer pydantic-ai) | instructor: instructor
# e.g. python3.12 -m venv "$REC_ROOT/frameworks/venvs/dspy" && "$REC_ROOT/frameworks/venvs/dspy/bin/pip" install dspy
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
R=${REC_ROOT:-${TMPDIR:-/tmp}/route-rec}/frameworks
for s in predict cot react history; do ./run.sh dspy-$s 18001 dspy dspy_s dspy-$s.json; done
./run.sh llamaindex-react 18002 llamaindex llamaindex_s llamaindex-react.json
./run.sh llamaindex-function 18002 llamaindex llamaindex_s
./run.sh lcreact 18003 lcreact lcreact_s lcreact.json
./run.sh crewai 18004 crewai crewai_s
./run.sh smolagents-toolcalling 18005 smolagents smolagents_s smolagents-toolcalling.json
./run.sh smolagents-code 18005 smolagents smolagents_s smolagents-code.json
./run.sh autogen 18006 autogen autogen_s
./run.sh haystack 18007 haystack haystack_s
./run.sh agno-chat 18008 agno agno_s
./run.sh agno-responses 18008 agno agno_s
./run.sh semantickernel 18009 semantickernel semantickernel_s
./run.sh mirascope 18010 mirascope mirascope_s
./run.sh marvin 18011 marvin marvin_s marvin.json
./run.sh instructor 18012 instructor instructor_s

V=$("$R/venvs/dspy/bin/python" -c "import dspy;print(dspy.__version__)")
./keep.sh dspy-predict 0001 dspy-predict-chat-first "dspy $V" "dspy.Predict('question -> answer'), default ChatAdapter, dspy.LM('openai/gpt-4.1')"
./keep.sh dspy-cot 0001 dspy-cot-chat-first "dspy $V" "dspy.ChainOfThought('question -> answer'), default ChatAdapter, dspy.LM('openai/gpt-4.1')"
./keep.sh dspy-react 0001 dspy-react-chat-first "dspy $V" "dspy.ReAct('question -> answer', tools=[get_weather]), default ChatAdapter, first step"
./keep.sh dspy-react 0002 dspy-react-chat-tool-round-trip "dspy $V" "dspy.ReAct('question -> answer', tools=[get_weather]), default ChatAdapter, the step after get_weather ran"
./keep.sh dspy-react 0003 dspy-react-chat-extract "dspy $V" "dspy.ReAct('question -> answer', tools=[get_weather]), default ChatAdapter, the final extract step after finish"
./keep.sh dspy-history 0002 dspy-predict-chat-second-turn "dspy $V" "dspy.Predict('question, history: dspy.History -> answer'), default ChatAdapter, second call with the first question and answer in history"
C="llama-index-core 0.14.25 (llama-index-llms-openai-like 0.8.1)"
./keep.sh llamaindex-react 0001 llamaindex-react-chat-first "$C" "llama_index.core.agent.workflow.ReActAgent(tools=[get_weather]) on OpenAILike(gpt-4.1), default prompts, streamed"
./keep.sh llamaindex-react 0002 llamaindex-react-chat-tool-round-trip "$C" "llama_index.core.agent.workflow.ReActAgent(tools=[get_weather]) on OpenAILike(gpt-4.1), default prompts, the request after get_weather ran"
./keep.sh llamaindex-react 0003 llamaindex-react-chat-second-turn "$C" "llama_index.core.agent.workflow.ReActAgent(tools=[get_weather]) on OpenAILike(gpt-4.1), a second agent.run with the same Context and ChatMemoryBuffer"
./keep.sh llamaindex-function 0001 llamaindex-function-chat-first "$C" "llama_index.core.agent.workflow.FunctionAgent(tools=[get_weather]) on OpenAILike(gpt-4.1, is_function_calling_model=True), default settings, streamed"
./keep.sh llamaindex-function 0002 llamaindex-function-chat-tool-round-trip "$C" "llama_index.core.agent.workflow.FunctionAgent(tools=[get_weather]) on OpenAILike(gpt-4.1, is_function_calling_model=True), the request after get_weather ran"
./keep.sh llamaindex-function 0003 llamaindex-function-chat-second-turn "$C" "llama_index.core.agent.workflow.FunctionAgent(tools=[get_weather]) on OpenAILike(gpt-4.1, is_function_calling_model=True), a second agent.run with the same Context and ChatMemoryBuffer"
C="langchain 0.3.30 (langchain-openai 0.3.35)"
./keep.sh lcreact 0001 langchain-react-chat-first "$C" "langchain.agents.create_react_agent + AgentExecutor with the stock hwchase17/react prompt (text from create_react_agent's docstring), ChatOpenAI(gpt-4.1), one tool"
./keep.sh lcreact 0002 langchain-react-chat-tool-round-trip "$C" "langchain.agents.create_react_agent + AgentExecutor with the stock hwchase17/react prompt (text from create_react_agent's docstring), ChatOpenAI(gpt-4.1), the request after get_weather ran"
C="crewai 1.15.44"
./keep.sh crewai 0001 crewai-chat-first "$C" "crewai Agent(role, goal, backstory, tools=[get_weather], llm=LLM('openai/gpt-4.1', base_url=...)) + Task(description=question, expected_output) + Crew.kickoff(), defaults otherwise"
./keep.sh crewai 0002 crewai-chat-tool-round-trip "$C" "crewai Agent(role, goal, backstory, tools=[get_weather], llm=LLM('openai/gpt-4.1', base_url=...)) + Task(description=question, expected_output) + Crew.kickoff(), the request after get_weather ran"
C="smolagents 1.26.0"
./keep.sh smolagents-toolcalling 0001 smolagents-toolcalling-chat-first "$C" "smolagents ToolCallingAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), default prompts"
./keep.sh smolagents-toolcalling 0002 smolagents-toolcalling-chat-tool-round-trip "$C" "smolagents ToolCallingAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), the request after get_weather ran"
./keep.sh smolagents-toolcalling 0003 smolagents-toolcalling-chat-second-turn "$C" "smolagents ToolCallingAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), a second agent.run(task, reset=False)"
./keep.sh smolagents-code 0001 smolagents-code-chat-first "$C" "smolagents CodeAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), default prompts"
./keep.sh smolagents-code 0002 smolagents-code-chat-tool-round-trip "$C" "smolagents CodeAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), the request after its code called get_weather"
./keep.sh smolagents-code 0003 smolagents-code-chat-second-turn "$C" "smolagents CodeAgent(tools=[get_weather], model=OpenAIServerModel('gpt-4.1'), max_steps=4), a second agent.run(task, reset=False)"
C="autogen-agentchat 0.7.5 (autogen-ext 0.7.5)"
./keep.sh autogen 0001 autogen-chat-first "$C" "autogen_agentchat AssistantAgent('assistant', tools=[get_weather], reflect_on_tool_use=True) on autogen_ext OpenAIChatCompletionClient('gpt-4.1'), default system message"
./keep.sh autogen 0002 autogen-chat-tool-round-trip "$C" "autogen_agentchat AssistantAgent('assistant', tools=[get_weather], reflect_on_tool_use=True) on OpenAIChatCompletionClient('gpt-4.1'), the reflection request after get_weather ran"
./keep.sh autogen 0003 autogen-chat-second-turn "$C" "autogen_agentchat AssistantAgent('assistant', tools=[get_weather], reflect_on_tool_use=True) on OpenAIChatCompletionClient('gpt-4.1'), a second agent.run(task=...) on the same agent"
C="haystack-ai 3.4.1"
./keep.sh haystack 0001 haystack-chat-first "$C" "haystack Agent(chat_generator=OpenAIChatGenerator(model='gpt-4.1'), tools=[create_tool_from_function(get_weather)]), system_prompt left unset"
./keep.sh haystack 0002 haystack-chat-tool-round-trip "$C" "haystack Agent(chat_generator=OpenAIChatGenerator(model='gpt-4.1'), tools=[create_tool_from_function(get_weather)]), the request after get_weather ran"
./keep.sh haystack 0003 haystack-chat-second-turn "$C" "haystack Agent(chat_generator=OpenAIChatGenerator(model='gpt-4.1'), tools=[...]), a second agent.run on the first run's messages plus a new user message"
C="agno 3.1.10"
./keep.sh agno-chat 0001 agno-chat-first "$C" "agno Agent(model=OpenAIChat(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), defaults otherwise"
./keep.sh agno-chat 0002 agno-chat-tool-round-trip "$C" "agno Agent(model=OpenAIChat(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), the request after get_weather ran"
./keep.sh agno-chat 0003 agno-chat-second-turn "$C" "agno Agent(model=OpenAIChat(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), a second agent.run in the same session_id"
./keep.sh agno-responses 0001 agno-responses-first "$C" "agno Agent(model=OpenAIResponses(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), defaults otherwise"
./keep.sh agno-responses 0002 agno-responses-tool-round-trip "$C" "agno Agent(model=OpenAIResponses(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), the request after get_weather ran"
./keep.sh agno-responses 0003 agno-responses-second-turn "$C" "agno Agent(model=OpenAIResponses(id='gpt-4.1'), tools=[get_weather], db=InMemoryDb(), add_history_to_context=True), a second agent.run in the same session_id"
C="semantic-kernel 1.45.0"
./keep.sh semantickernel 0001 semantic-kernel-chat-first "$C" "semantic_kernel ChatCompletionAgent(service=OpenAIChatCompletion('gpt-4.1'), name='Assistant', plugins=[WeatherPlugin]), default auto function choice"
./keep.sh semantickernel 0002 semantic-kernel-chat-tool-round-trip "$C" "semantic_kernel ChatCompletionAgent(service=OpenAIChatCompletion('gpt-4.1'), name='Assistant', plugins=[WeatherPlugin]), the request after get_weather ran"
./keep.sh semantickernel 0003 semantic-kernel-chat-second-turn "$C" "semantic_kernel ChatCompletionAgent(service=OpenAIChatCompletion('gpt-4.1'), name='Assistant', plugins=[WeatherPlugin]), a second get_response on the first one's ChatHistoryAgentThread"
C="mirascope 2.8.2"
./keep.sh mirascope 0001 mirascope-responses-first "$C" "mirascope v2 @llm.call('openai/gpt-4.1', tools=[get_weather]) returning the question, its default (Responses) API"
./keep.sh mirascope 0002 mirascope-responses-tool-round-trip "$C" "mirascope v2 @llm.call('openai/gpt-4.1', tools=[get_weather]), response.resume(response.execute_tools()) after get_weather ran"
./keep.sh mirascope 0003 mirascope-responses-second-turn "$C" "mirascope v2 @llm.call('openai/gpt-4.1', tools=[get_weather]), response.resume(second task) after the first answer"
C="marvin 3.2.7 (pydantic-ai 1.89.1)"
./keep.sh marvin 0001 marvin-chat-first "$C" "marvin.run(question, tools=[get_weather], agents=[marvin.Agent(name='Marvin', model=OpenAIChatModel('gpt-4.1'))], thread=marvin.Thread()), streamed"
./keep.sh marvin 0002 marvin-chat-tool-round-trip "$C" "marvin.run(question, tools=[get_weather], agents=[marvin.Agent(name='Marvin', model=OpenAIChatModel('gpt-4.1'))], thread=...), the request after get_weather ran"
./keep.sh marvin 0003 marvin-chat-second-turn "$C" "marvin.run(second task, tools=[get_weather], agents=[the same Agent], thread=the same marvin.Thread)"
./keep.sh instructor 0001 instructor-chat-first "instructor 1.17.0 (openai 3.3.0)" "instructor.from_openai(OpenAI()).chat.completions.create(model='gpt-4.1', response_model=WeatherQuery), default Mode.TOOLS"
