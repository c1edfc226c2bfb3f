"""What the router's clients inside the process -- the server and its web view, the in-process
OpenAI client, the framework adapters -- use of a router: a Protocol `Router` satisfies, so
they depend on this interface and never on router/core.py (the import arrows point one way:
the Router may build them; they never reach back into it).

A few methods and a read-only view: requests go through the request scope (decide, admit,
call or stream, finish: router/scope.py), with a watch of their own for what the caller counts;
everything else is read through `view` (router/view.py). Nothing here registers, replaces or
sets a part: a router is whole when it is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from router.scope import RequestScope
    from router.store.feedback import Feedback
    from router.view import RouterView

__all__ = ["RouterService"]


class RouterService(Protocol):
    @property
    def scope(self) -> RequestScope: ...  # what every request goes through

    @property
    def view(self) -> RouterView: ...  # the router's config and parts, read-only

    @property
    def verdicts(self) -> Feedback: ...  # the operator's and clients' verdicts on logged requests

    async def refresh(self, *, session: str | None = None) -> None: ...
    async def aclose(self) -> None: ...
