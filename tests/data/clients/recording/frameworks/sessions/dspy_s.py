"""dspy sessions: Predict, ChainOfThought, ReAct (default ChatAdapter), Predict with dspy.History."""
import sys

import dspy
from common import KEY, QUESTION, SECOND, get_weather

base, scenario = sys.argv[1], sys.argv[2]
lm = dspy.LM("openai/gpt-4.1", api_base=f"{base}/v1", api_key=KEY, cache=False, num_retries=0)
dspy.configure(lm=lm)

if scenario == "dspy-predict":
    print(dspy.Predict("question -> answer")(question=QUESTION))
elif scenario == "dspy-cot":
    print(dspy.ChainOfThought("question -> answer")(question=QUESTION))
elif scenario == "dspy-react":
    print(dspy.ReAct("question -> answer", tools=[get_weather])(question=QUESTION))
elif scenario == "dspy-history":
    predict = dspy.Predict("question, history: dspy.History -> answer")
    history = dspy.History(messages=[])
    first = predict(question=QUESTION, history=history)
    history.messages.append({"question": QUESTION, **first})
    print(predict(question=SECOND, history=history))
