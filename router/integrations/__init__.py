"""The router as a model inside agent frameworks, one import each (optional extras):

    from router.integrations.openai_agents import RouterModel    # pip install "latency-router[agents]"
    from router.integrations.langchain import ChatRouter         # pip install "latency-router[langchain]"
    from router.integrations.pydantic_ai import RouterModel      # pip install "latency-router[pydantic-ai]"

Each is written against its framework's public model interface and calls the Router directly
(no server, no socket): it streams text token by token and tool calls as they form, carries the
router's decision (backend, tier, score, cost, downgrade) in the framework's own metadata, and
takes `model="auto"`, a backend or a consortium. Importing `router` or this package imports no
framework; each module imports its own when it is imported.

Frameworks that take an OpenAI client instead can use `router.async_openai_client()`. Importing
an adapter whose framework is not installed raises ModuleNotFoundError naming the extra to install.
"""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(exc: ModuleNotFoundError, extra: str) -> ModuleNotFoundError:
    """What an adapter raises when its framework is missing: which extra installs it."""
    package = (exc.name or "a module").split(".")[0]
    return ModuleNotFoundError(
        f"{package} is not installed, and this adapter needs it: pip install "
        f"'latency-router[{extra}]' (from a clone: pip install '.[{extra}]')", name=package)
