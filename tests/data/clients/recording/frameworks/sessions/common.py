"""What every session driver shares: the two tasks, the dummy key, the one tool."""

QUESTION = "What is the weather in Paris right now?"
SECOND = "Now explain what the echo builtin does with the -n flag."
KEY = "sk-corpus-dummy-key-0000000000"


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    print(f"[tool ran] get_weather({city!r})", flush=True)
    return f"Sunny, 21 C in {city}"
