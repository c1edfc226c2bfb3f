"""The config schema: pydantic models that forbid unknown keys, so a typo fails at load time.

Units are in the key names: `_ms`, `_s`, prices in dollars per million tokens.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from backends.base import BackendSettings
from backends.secrets import dsn_secret, literal_secret_paths, url_secret
from backends.types import Price
from policies.selection import OnDeadlineRisk, Prefer
from router.consortium.spec import ConsortiumConfig

__all__ = ["ApiKeyConfig", "BackendConfig", "BreakerConfig", "Config", "LatencyModelConfig", "LatencyPrior", "LearnConfig", "LogConfig", "PriceConfig", "RoutingConfig",
           "ScorerConfig", "ServerConfig", "StateConfig", "TierConfig"]

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _section(model: type[BaseModel]) -> Any:
    """A section's default when the file leaves it out, made without validation (its defaults
    are valid): an instance made here at import would build that model's validator on every
    start of every command, ~3 ms each; the file's own sections are validated with the root."""
    return Field(default_factory=model.model_construct)


class PriceConfig(_Strict):
    """What a backend costs, in dollars per million tokens."""

    input: float = Field(0.0, ge=0, description="dollars per million input tokens")
    output: float = Field(0.0, ge=0, description="dollars per million output tokens")
    cache_read: float | None = Field(None, ge=0, description="dollars per million input tokens read from the "
                                     "provider's prompt cache (default: litellm's price map, else input / 10)")
    cache_write: float | None = Field(None, ge=0, description="dollars per million input tokens written to the "
                                      "prompt cache (default: litellm's price map, else input; x1.25 for anthropic)")


class LatencyPrior(_Strict):
    """What to assume before any request to this backend has been measured."""

    ttft_ms: float | None = Field(None, gt=0, description="time to first token")
    tokens_per_s: float | None = Field(None, gt=0, description="decode rate after the first token")
    canvas_ms: float | None = Field(None, gt=0, description="diffusion: wall time per canvas")


class BackendConfig(_Strict):
    """One model behind one backend kind."""

    kind: str = Field(min_length=1, description="openai, anthropic, litellm, diffusion-local or a kind registered "
                      "with register_kind: what each calls and needs is under [backend kinds](#backend-kinds)")
    model: str = Field(min_length=1, description="the model's name at the provider (what its API is sent)")
    base_url: str | None = Field(None, description="the provider's API root (default per kind); ${NAME} parts "
                                 "are read from the environment")
    api_key: str | None = Field(None, description="an environment reference: ${NAME}")
    price: PriceConfig = _section(PriceConfig)
    decoding: Literal["autoregressive", "diffusion"] = Field(
        "autoregressive", description="diffusion: time and cost per canvas of `canvas_length` tokens, not per token")
    canvas_length: int = Field(256, ge=1, le=65536, description="diffusion: tokens a canvas holds")
    timeout_s: float = Field(60.0, gt=0, description="one attempt at most (the request's deadline may cut it shorter)")
    max_retries: int = Field(2, ge=0, le=10, description="retries of a failed attempt (routing.retries per error class)")
    context_window: int | None = Field(None, gt=0, description="longest prompt in tokens; longer ones go elsewhere")
    max_output_tokens: int | None = Field(None, gt=0, description="longest answer in tokens; a larger max_tokens "
                                          "goes elsewhere, or is refused (400). Default: litellm's model map, else "
                                          "the context window, else 1,048,576")
    params: dict[str, Any] = Field(default_factory=dict, description="generation parameters, checked per kind")
    options: dict[str, Any] = Field(default_factory=dict, description="the backend's own settings, checked per kind")
    passthrough: dict[str, Any] = Field(default_factory=dict, description="provider parameters sent verbatim, unchecked")
    client_params: list[str] = Field(default_factory=list, description="fields of params or passthrough a client's "
                                     "request may change (their value is then a default); every other configured "
                                     "field replaces the client's")
    headers: dict[str, str] = Field(default_factory=dict, description="extra HTTP headers; ${NAME} for credentials")
    latency: LatencyPrior | None = None
    # Rate limits (router/state/rate_limits.py): shared by every replica when state is in Redis.
    rpm: int | None = Field(None, gt=0, description="requests per minute this router sends the backend, at most")
    tpm: int | None = Field(None, gt=0, description="tokens per minute (input estimate + max_tokens at admission, "
                            "corrected with the real usage after)")

    @field_validator("api_key")
    @classmethod
    def _key_is_env_reference(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_REF.match(value):
            # Deliberately does not echo the value: it may be a real key.
            raise ValueError(
                "api_key must name an environment variable, like ${ANTHROPIC_API_KEY}; "
                "never write the key itself into a config file"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _url_has_scheme(cls, value: str | None) -> str | None:
        if value is None:
            return value
        secret = url_secret(value)
        if secret is not None:  # the URL itself is not echoed: it holds the credential
            raise ValueError(f"base_url holds {secret}; write it as an environment reference, "
                             "e.g. https://host/v1?key=${GEMINI_API_KEY}, never the credential itself")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https:// (got {value!r})")
        return value

    @field_validator("params", "options", "passthrough", "headers")
    @classmethod
    def _no_literal_secrets(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        found = literal_secret_paths(value, headers=info.field_name == "headers")  # a header value of any name
        if found:
            key = ".".join(str(p) for p in found[0])
            raise ValueError(f"{info.field_name}.{key} is a credential written into the config; name an environment "
                             f"variable instead, like {key}: ${{MY_API_KEY}} (the value is read at request time, "
                             "never stored)")
        return value

    @model_validator(mode="after")
    def _client_params_are_configured(self) -> BackendConfig:
        unset = [name for name in self.client_params if name not in self.params and name not in self.passthrough]
        if unset:
            raise ValueError(f"client_params names {', '.join(map(repr, unset))}, which neither params nor "
                             "passthrough sets; a field the config does not set is the client's already")
        return self

    @property
    def api_key_env(self) -> str | None:
        match = _ENV_REF.match(self.api_key) if self.api_key else None
        return match.group(1) if match else None

    def settings(self, name: str) -> BackendSettings:
        return BackendSettings(
            name=name,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            price=Price(self.price.input, self.price.output, self.price.cache_read, self.price.cache_write),
            decoding=self.decoding,
            canvas_length=self.canvas_length,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
            params=dict(self.params),
            options=dict(self.options),
            passthrough=dict(self.passthrough),
            client_params=frozenset(self.client_params),
            headers=dict(self.headers),
        )


class ScorerConfig(BaseModel):
    """`kind` picks the scorer; the other keys are that scorer's options (checked when built)."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    kind: str = Field("learned", description="learned: the shipped fitted scorer (`weights: FILE` for your own); "
                      "length: the baseline it is measured against (`threshold_chars`)")

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TierConfig(_Strict):
    """A tier: a band of scores and the backends that answer it, lowest first."""

    name: str = Field(min_length=1, description="shown in decisions, headers and the log")
    # Upper edge of this tier's score band; the last tier has none and takes the rest.
    # "calibrated" uses the threshold stored with the scorer's weights (`route calibrate`).
    below: float | Literal["calibrated"] | None = Field(
        None, description="upper edge of this tier's score band (the last tier has none); calibrated: the "
        "threshold stored with the scorer's weights")
    # The head deciding the boundary above this tier (its `below` is a threshold on this
    # scorer's value; "calibrated": its stored threshold). None: routing.scorer. See policies/ladder.py.
    scorer: ScorerConfig | None = Field(None, description="the scorer deciding the boundary above this tier "
                                        "(default: routing.scorer)")
    backends: list[str] = Field(min_length=1, description="backends or consortia of this tier")
    deadline_ms: float | None = Field(None, gt=0, description="this tier's default deadline")
    on_deadline_risk: OnDeadlineRisk | None = Field(None, description="overrides routing.on_deadline_risk")

    @field_validator("below")
    @classmethod
    def _in_unit_interval(cls, value):
        if isinstance(value, float) and not 0.0 < value <= 1.0:
            raise ValueError(f"below must be a score between 0 and 1 (got {value})")
        return value


class BreakerConfig(_Strict):
    """Per-backend circuit breaker: open after `failures` in a row, probe again after the cooldown.
    A request with no other backend left probes sooner (`probe_ms`, doubling per failure up to
    `probe_max_ms`, at most the cooldown; policies/breaker.py). A 503 tells clients that pace."""

    failures: int = Field(3, ge=1, description="failures in a row that open the breaker")
    cooldown_ms: float = Field(30_000, gt=0, description="how long it stays open; then one probe is let through")
    probe_ms: float = Field(1000, gt=0, description="with no other backend left, a request may probe an open "
                            "breaker's backend this long after it opened; doubling with each failure, at most "
                            "probe_max_ms")
    probe_max_ms: float = Field(16_000, gt=0, description="the longest wait between those probes, and so the "
                                "longest Retry-After a 503 from a dead upstream says; at most cooldown_ms")


class RetryBudgetConfig(_Strict):
    """Retries across requests, per backend (policies/retry.py): a bucket of `tokens`; a
    failed attempt takes one, a success gives back `ratio`; retries only while it is over half full."""

    tokens: float = Field(10.0, ge=1, description="the bucket; retries only while it is over half full")
    ratio: float = Field(0.1, gt=0, le=1, description="what a success puts back (a failed attempt takes one)")


class SessionsConfig(_Strict):
    """Sessions (router/sessions.py): a conversation keeps its backend and its tier only moves up."""

    enabled: bool = Field(True, description="false: every call is routed on its own")
    ttl_s: float = Field(3600.0, gt=0, description="a session unused this long is forgotten")
    max_entries: int = Field(10_000, ge=1, description="sessions kept in memory at most, least recently used dropped")
    cache_ttl_s: float = Field(300.0, gt=0, description="how long a provider keeps a prompt cached (costs of a move)")


class LatencyModelConfig(_Strict):
    """How the live latency model learns (policies/latency.py) and when it explores."""

    half_life_samples: float = Field(20, gt=1, description="a sample's weight halves after this many newer ones")
    prior_weight_samples: float = Field(3, ge=0, description="how many measured samples a config prior is worth")
    explore_rate: float = Field(0.05, ge=0, le=1, description="share of requests that re-measure a stale backend")
    stale_after_ms: float = Field(300_000, gt=0, description="a backend unmeasured this long is stale")
    flush_interval_ms: float = Field(5_000, ge=0, description="how often learned state is saved to the store")


class LearnConfig(_Strict):
    """Routing that learns from its own traffic (router/learning/, docs/guide/learning.md). Labels come
    from feedback, consortium rankings and shadow judging: for `shadow_rate` of routed requests,
    after the client has its answer, the other tier answers too and `judge` says whether the
    lower tier's answer was as good, within `budget_usd_per_day`. With `auto` the weights are
    refitted every `refit_every` new labels and a new version adopted only when it wins on
    labels it was not fitted on."""

    shadow_rate: float = Field(0.0, ge=0, le=1, description="share of routed requests judged against the other tier")
    budget_usd_per_day: float = Field(1.0, ge=0, description="most shadow judging may spend per UTC day (0: none)")
    judge: str | None = Field(None, description="backend or consortium that judges; default: the first diffusion "
                              "backend above the lowest tier")
    auto: bool = Field(False, description="refit after every `refit_every` new labels; adopt only what wins")
    refit_every: int = Field(50, ge=1, le=1_000_000, description="new labels of a boundary between refits")
    max_labels_per_key: int = Field(8, ge=0, le=1_000_000, description="labels from one non-admin client key's "
                                    "feedback a refit reads (its most recent): no single key, nor a few, can "
                                    "outweigh what the router judged itself")
    max_tokens: int = Field(512, ge=1, le=65536, description="max_tokens of the other tier's shadow answer")
    judge_max_tokens: int = Field(256, ge=16, le=65536, description="max_tokens of each judge reply")
    max_in_flight: int = Field(4, ge=1, le=1024, description="shadow judgements running at once; more are skipped")
    timeout_s: float = Field(120.0, gt=0, description="a shadow judgement (answer and both judge calls) gives up after this")
    refresh_ms: float = Field(2_000, ge=0, le=3_600_000, description="how often a router looks for a version "
                              "another process adopted or rolled back to")
    moved_window: int = Field(500, ge=0, le=100_000, description="the last logged requests a refit places again, "
                              "to report the traffic a new version would move")
    max_moved: float = Field(0.1, ge=0, le=1, description="share of those requests a version fitted on shadow "
                             "judgements or non-admin verdicts may move without `route learn adopt` (an admin's "
                             "own verdicts apply under `auto` whatever they move)")


class RoutingConfig(_Strict):
    """How a prompt finds its backend: the scorer, the tiers, and what to optimise within them."""

    scorer: ScorerConfig = _section(ScorerConfig)
    tiers: list[TierConfig] = Field(min_length=1)
    deadline_ms: float | None = Field(None, gt=0, description="default deadline for every request")
    prefer: Prefer = Field("cheap", description="among backends that meet the deadline: cheap (the fastest of the "
                           "cheapest), fast, best (the strongest tier)")
    # Quality is never traded silently: by default a tier that cannot meet the deadline is still
    # tried (the miss shows as a late or failed request); `downgrade` must be asked for, and is
    # then marked on the decision, the result, the server's headers and the request log.
    on_deadline_risk: OnDeadlineRisk = Field("best-effort", description="best-effort | downgrade | fail: when no "
                                             "backend at the prompt's tier can meet the deadline")
    cost_tolerance: float = Field(0.1, ge=0, description="`cheap`: costs within this fraction of the cheapest tie; the fastest wins")
    hedge: bool = Field(False, description="start the next candidate when the first is past its p95 to first token")
    breaker: BreakerConfig = _section(BreakerConfig)
    retry_budget: RetryBudgetConfig = _section(RetryBudgetConfig)
    sessions: SessionsConfig = _section(SessionsConfig)
    latency: LatencyModelConfig = _section(LatencyModelConfig)
    max_concurrency: int = Field(128, ge=1, le=65536, description="upstream requests in flight at once, over "
                                 "every request and consortium of this router")
    retries: dict[Literal["BackendTimeout", "RateLimited", "BackendUnavailable", "MalformedResponse"],
                  Annotated[int, Field(ge=0, le=10)]] = Field(
        default_factory=dict, description="retries per error class, overriding each backend's max_retries")
    learn: LearnConfig | None = Field(None, description="learning from traffic (docs/guide/learning.md); absent: off")


class LogConfig(_Strict):
    """The request log (router/store/): one record per routed request, in the local SQLite store
    (`backend: sqlite`) or in PostgreSQL (`backend: postgres`, shared by every replica)."""

    enabled: bool = Field(True, description="false: no log at all (--no-log for one run)")
    store_content: bool = Field(True, description="keep prompts and answers; False keeps only the metadata")
    store_thinking: bool = Field(False, description="also keep the model's thinking, in its own column, cut like "
                                                    "answers (needs store_content)")
    max_content_chars: int = Field(100_000, ge=0, description="prompt and answer cut to this many characters (0 = whole)")
    flush_interval_ms: float = Field(200, ge=0, description="records wait at most this long to be written; 0 = before "
                                                           "the request returns (a SIGKILL loses none)")
    path: str | None = Field(None, description="SQLite file; default: route.db in the user data dir")
    backend: Literal["sqlite", "postgres"] = Field("sqlite", description="sqlite: a local file; postgres: one database for every replica")
    dsn: str | None = Field(None, description="postgres: ${NAME}, the variable holding the connection string")
    buffer_records: int = Field(10_000, ge=1, description="records held in memory while PostgreSQL is unreachable; "
                                                          "beyond this the oldest are dropped")
    timeout_ms: float = Field(5000, gt=0, description="postgres: connecting and each statement may take this long; "
                                                      "then the database counts as away (with a warning)")
    spool_dir: str | None = Field(None, description="postgres with flush_interval_ms: 0: where records are spooled "
                                                    "(fsynced) while the database is away; default: spool/ in the "
                                                    "user data dir")

    @field_validator("dsn")
    @classmethod
    def _dsn_holds_no_password(cls, value: str | None) -> str | None:
        # The DSN itself is never echoed: it may hold the password.
        if value is not None and dsn_secret(value):
            raise ValueError(f"dsn holds {dsn_secret(value)}; write dsn: ${{ROUTE_PG_DSN}} and export the connection "
                             "string in that variable, so the password is never stored in config")
        return value

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> LogConfig:
        if self.backend == "postgres" and not self.dsn:
            raise ValueError("backend: postgres needs dsn: (for example dsn: ${ROUTE_PG_DSN})")
        if self.backend == "sqlite" and self.dsn:
            raise ValueError("dsn is for backend: postgres; for SQLite set path: (or nothing, for the default file)")
        return self


class StateConfig(_Strict):
    """Where what the router learns lives: `local` (the SQLite store next to the request log, shared
    by the processes of one machine) or `redis` (shared by every replica that names the same URL
    and prefix). With Redis unreachable a replica runs on its local state and catches up later."""

    backend: Literal["local", "redis"] = Field("local", description="local: this machine; redis: every replica")
    url: str | None = Field(None, description="redis:// or rediss:// URL; ${NAME} for one that holds a password")
    prefix: str = Field("route:", min_length=1, max_length=64, description="key prefix, so routers can share one Redis")
    timeout_ms: float = Field(250, gt=0, le=60_000, description="a Redis call slower than this counts as Redis down")
    retry_ms: float = Field(2_000, gt=0, le=600_000, description="after Redis was down, try it again this often")
    refresh_ms: float = Field(500, ge=0, le=600_000, description="a decision adopts what other replicas learned "
                              "(latency, open breakers) when its view is older than this; 0 = before every one")

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None or _ENV_REF.match(value):
            return value
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"url must start with redis://, rediss:// or unix:// (got {value!r}), or be an "
                             "environment reference such as ${ROUTE_REDIS_URL}")
        secret = url_secret(value)
        if secret:
            raise ValueError(f"url holds {secret}; write url: ${{ROUTE_REDIS_URL}} and export the URL in that "
                             "variable, so the password is never stored in config")
        return value

    @model_validator(mode="after")
    def _redis_needs_url(self) -> StateConfig:
        if self.backend == "redis" and not self.url:
            raise ValueError("backend: redis needs url: (for example url: ${ROUTE_REDIS_URL})")
        return self


class SpendConfig(_Strict):
    """An optional cap on what requests may cost, read from the request log (router/store/spend.py)."""

    cap_usd: float | None = Field(None, gt=0, description="refuse new requests once logged spend reaches this")
    window_days: float = Field(30, gt=0, description="the spend counted is that of the last this many days")


class ApiKeyConfig(_Strict):
    """One client key of `route serve`: the key itself lives in the environment, never here;
    its name labels its limits (and is all that is ever shown or stored)."""

    key: str = Field(description="an environment reference: ${NAME}")
    rpm: int | None = Field(None, gt=0, description="requests per minute this key may send")
    tpm: int | None = Field(None, gt=0, description="tokens per minute this key may use (counted after each answer)")
    admin: bool = Field(False, description="sees every key's requests in the web view and may give feedback on "
                        "any request; other keys see and judge only their own")

    @field_validator("key")
    @classmethod
    def _key_is_env_reference(cls, value: str) -> str:
        if not _ENV_REF.match(value):  # the value is not echoed: it may be the key itself
            raise ValueError("key must name an environment variable, like ${ALICE_ROUTE_KEY}; never write the key "
                             "itself into a config file")
        return value

    @property
    def env(self) -> str:
        match = _ENV_REF.match(self.key)
        assert match is not None  # the validator saw to it
        return match.group(1)


class ServerConfig(_Strict):
    """`route serve`: the client keys it accepts (besides --api-key-env), each with its own limits."""

    keys: dict[str, ApiKeyConfig] = Field(default_factory=dict, description="key name -> its ${ENV} and limits")
    feedback_rpm: int = Field(60, gt=0, description="feedback verdicts a minute each client key may post")
    failed_key_rpm: int = Field(10, gt=0, description="wrong keys a minute one client address or one presented key "
                                "may give (API and web view together, per process) before more wrong keys get a "
                                "429; a right key is always let in")
    forwarded_allow_ips: list[str] = Field(default_factory=list, description="the reverse proxies whose "
                                           "X-Forwarded-For and X-Forwarded-Proto are believed (addresses or "
                                           "networks, e.g. 10.0.0.5, 10.0.0.0/8); none by default: the client "
                                           "address is the socket's peer")

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies_are_addresses(cls, value: list[str]) -> list[str]:
        import ipaddress

        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network; name each proxy by its address "
                                 "(10.0.0.5) or its network (10.0.0.0/8), as the server sees the connection "
                                 "come from") from None
        return value


class Config(_Strict):
    backends: dict[str, BackendConfig] = Field(min_length=1, description="the models, by the name routing uses")
    routing: RoutingConfig = Field(description="how a prompt finds its backend")
    # The schema lives in the consortium package (router/consortium/spec.py).
    consortia: dict[str, ConsortiumConfig] = Field(default_factory=dict, description="named consortia: N models "
                                                   "answer, an arbiter ranks or synthesizes (router/consortium/spec.py)")
    # Model names clients send (an agent's `claude-sonnet-4-5`, a glob like `claude-*`) mapped to
    # `auto`, a backend or a consortium, for `route serve`.
    aliases: dict[str, str] = Field(default_factory=dict, description="client model name or glob -> route name")
    log: LogConfig = _section(LogConfig)
    spend: SpendConfig = _section(SpendConfig)
    state: StateConfig = _section(StateConfig)
    server: ServerConfig = _section(ServerConfig)
