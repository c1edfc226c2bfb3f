"""What the router's clients inside the process -- the server and its web view, the in-process
OpenAI client, the framework adapters -- use of a router: a Protocol `Router` satisfies, so
they depend on this interface and never on router/core.py (the import arrows point one way:
the Router may build them; they never reach back into it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, Unpack

if TYPE_CHECKING:
    from backends.base import Backend
    from backends.types import Message
    from policies.breaker import BreakerBoard
    from policies.routing_model import RoutingModel
    from policies.scoring import Scorer
    from policies.tiers import Tier
    from router.config import Config
    from router.config_loader import LoadedConfig
    from router.decision import Attempt, Decision, Outcome, RouteResult
    from router.latency_tracker import LatencyTracker
    from router.learning.learner import Learner
    from router.options import RouteOptions
    from router.redaction import Redactor
    from router.scope import RequestScope
    from router.sessions import Sessions
    from router.state.base import SharedState
    from router.state.rate_limits import RateLimiter
    from router.store.feedback import Feedback
    from router.store.request_log import RequestLog

__all__ = ["RouterService"]


class RouterService(Protocol):
    scope: RequestScope  # decide, admit, call or stream, finish: what every request goes through
    config: Config
    loaded: LoadedConfig
    source: str
    redactor: Redactor
    rate_limits: RateLimiter
    breakers: BreakerBoard
    latency: LatencyTracker
    sessions: Sessions | None
    request_log: RequestLog | None
    learner: Learner | None

    @property
    def shared(self) -> SharedState: ...
    @property
    def model(self) -> RoutingModel: ...
    @property
    def scorer(self) -> Scorer: ...
    @property
    def tiers(self) -> tuple[Tier, ...]: ...
    @property
    def verdicts(self) -> Feedback: ...

    def names(self) -> list[str]: ...
    def backend(self, name: str) -> Backend: ...
    def state(self) -> dict[str, dict[str, Any]]: ...
    def add_observer(self, observer: Callable[[Attempt, Decision | None], None]) -> None: ...
    def add_request_observer(self, observer: Callable[[Outcome], None]) -> None: ...
    def persist(self, *, warn: bool = True, state: SharedState | None = None) -> str | None: ...
    async def refresh(self, *, session: str | None = None) -> None: ...
    async def acomplete(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> RouteResult: ...
    def astream(self, prompt_or_messages: str | list[Message], **options: Unpack[RouteOptions]) -> Any: ...
    async def aclose(self) -> None: ...
