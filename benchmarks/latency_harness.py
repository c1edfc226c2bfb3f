"""The harness behind benchmarks/latency_routing.py: the simulator in its own process, both routers
built from one description of the backends, one driver, one bill and one scorer for both.

Fairness rules it enforces (issue 17):
  * the simulator runs in a separate process, so it shares no GIL with the router under test;
  * neither router gets latency priors; both get the same prices, retries, breaker/cooldown
    (failures, seconds) and fallbacks between tiers;
  * both are warmed up on a model that the measured run never uses (code paths and connection
    set-up, not latency knowledge);
  * every request carries its deadline; ours enforces it, LiteLLM gets it as `timeout`, and
    both are scored with latency capped at the deadline (an answer after it is a miss);
  * every call a provider would bill is billed alike: answers by their usage, calls abandoned
    mid-way (a lost hedge, a timeout) by the input and the output generated until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from backends.base import BackendSettings
from backends.errors import BackendTimeout
from backends.openai_http import OpenAIBackend
from backends.simulator import SimControl
from backends.simulator.answers import prompt_tokens
from backends.types import Price, Usage
from router.config_loader import load_config
from router.core import Router

# litellm (imported lazily, by LiteLLM's client only) must not fetch its price map from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
WARMUP_MODEL = "warmup"  # a simulated model no measured request uses
_CURRENT_JOB: contextvars.ContextVar[Job | None] = contextvars.ContextVar("bench_job", default=None)
_LITELLM_LISTS = ("callbacks", "success_callback", "failure_callback", "input_callback", "service_callback",
                  "_async_success_callback", "_async_failure_callback", "_async_input_callback")


@dataclass(frozen=True)
class Spec:
    """One backend: the simulated model behind it, its tier, price ($/Mtok) and unscaled profile."""

    model: str
    tier: str
    price: tuple[float, float]
    profile: dict[str, Any]

    def scaled(self, scale: float, **changes: Any) -> dict[str, Any]:
        """The simulator profile with every time multiplied by `scale` (rates divided)."""
        out = {**self.profile, **changes}
        for key in ("ttft_s", "canvas_s"):
            if key in out:
                out[key] = out[key] * scale
        if out.get("tokens_per_s"):
            out["tokens_per_s"] = out["tokens_per_s"] / scale
        return out


@dataclass(frozen=True)
class Job:
    index: int
    prompt: str
    tier: str  # the tier the prompt needs (our scorer's choice, given to both routers)
    max_tokens: int | None
    deadline_s: float
    at_s: float  # arrival, seconds after the start


@dataclass
class Outcome:
    elapsed_s: float
    ok: bool
    backend: str = ""
    why: str = ""  # a failure's kind: the exception's type, and for ours each attempt's error


@dataclass
class Run:
    name: str
    jobs: list[Job]
    outcomes: list[Outcome]
    bill_usd: float


@dataclass
class Setup:
    """What both routers are built from. Times unscaled except where named `_s` after scaling."""

    specs: Mapping[str, Spec]
    tiers: list[tuple[str, float | None, list[str]]]  # (name, below, backends), weakest first
    scale: float
    retries: int = 2
    breaker_failures: int = 3
    cooldown_s: float = 2.5  # scaled already
    threshold_chars: int = 600
    hedge: bool = True
    on_deadline_risk: str = "best-effort"
    litellm_args: dict[str, Any] = field(default_factory=lambda: {"ttl": 10, "lowest_latency_buffer": 0.5})


# -- the simulator, in a process of its own -------------------------------------------------------

@contextlib.contextmanager
def simulator(specs: Mapping[str, Spec], scale: float, extra: Mapping[str, dict] | None = None) -> Iterator[
        tuple[str, SimControl]]:
    """(base_url, control) of `python -m backends.simulator` serving the scaled profiles."""
    # Timings shrink with `scale` but a real server's event rate must not grow with 1/scale:
    # tokens due within 10 ms go out in one event (about one decode step of a real server).
    profiles = {spec.model: {**spec.scaled(scale), "stream_interval_s": 0.01} for spec in specs.values()}
    profiles[WARMUP_MODEL] = {"ttft_s": 0.0, "answer_tokens": 8}
    profiles.update(extra or {})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "profiles.yaml"
        path.write_text(yaml.safe_dump({"profiles": profiles}))
        proc = subprocess.Popen([sys.executable, "-m", "backends.simulator", "--port", "0", "--profiles", str(path)],
                                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if not line.startswith("listening "):
                raise RuntimeError(f"the simulator did not start (said {line!r}, exit {proc.poll()})")
            url = line.removeprefix("listening ")
            control = SimControl(url)
            try:
                yield f"{url}/v1", control
            finally:
                control.close()
        finally:
            assert proc.stdin is not None
            proc.stdin.close()  # the simulator exits when its stdin closes
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


# -- billing: the same rule for both routers ------------------------------------------------------

def billed(spec: Spec, scale: float, prompt: str, max_tokens: int | None, elapsed_s: float | None,
           profile: Mapping[str, Any] | None = None, usage: Usage | None = None) -> float:
    """What a provider charges: an answer by its usage; an abandoned call (`elapsed_s`) by its
    input and the output the profile in force had generated by then."""
    price = Price(*spec.price)
    if usage is not None:
        return price.cost(usage)
    profile = profile or spec.profile
    answer = profile.get("answer_tokens", 40)
    answer = answer if max_tokens is None else min(answer, max_tokens)
    decode_s = (elapsed_s or 0.0) / scale - profile.get("ttft_s", 0.0)  # unscaled
    if decode_s <= 0:
        out = 0
    elif profile.get("decoding") == "diffusion":
        out = int(decode_s // profile["canvas_s"]) * 256
    else:
        out = int(decode_s * (profile.get("tokens_per_s") or 1e9)) + 1
    return price.cost(Usage(prompt_tokens([{"role": "user", "content": prompt}]), min(out, answer)))


class Bill:
    """Accumulates what both routers' calls cost; profiles change at runtime (drift scenarios)."""

    def __init__(self, specs: Mapping[str, Spec], scale: float):
        self.specs, self.scale = specs, scale
        self.profiles = {name: dict(spec.profile) for name, spec in specs.items()}
        self.total = 0.0

    def answer(self, name: str, usage: Usage) -> None:
        if name in self.specs:
            self.total += billed(self.specs[name], self.scale, "", None, None, usage=usage)

    def abandoned(self, name: str, job: Job, elapsed_s: float) -> None:
        if name in self.specs:
            self.total += billed(self.specs[name], self.scale, job.prompt, job.max_tokens, elapsed_s,
                                 self.profiles[name])


# -- our router -----------------------------------------------------------------------------------

def our_config(setup: Setup, base_url: str, names: list[str] | None = None) -> dict:
    names = names or list(setup.specs)
    backends: dict[str, Any] = {}
    for name in names:
        spec = setup.specs[name]
        decoding = spec.profile.get("decoding", "autoregressive")
        backends[name] = {"kind": "openai", "model": spec.model, "base_url": base_url, "decoding": decoding,
                          "price": {"input": spec.price[0], "output": spec.price[1]},
                          "max_retries": setup.retries, "timeout_s": 60}  # no `latency:` priors
    backends[WARMUP_MODEL] = {"kind": "openai", "model": WARMUP_MODEL, "base_url": base_url}
    tiers = []
    for tier, below, members in setup.tiers:
        present = [m for m in members if m in names]
        if present:
            tiers.append({"name": tier, "backends": present, **({"below": below} if below is not None else {})})
    return {"backends": backends,
            "routing": {"scorer": {"kind": "length", "threshold_chars": setup.threshold_chars}, "tiers": tiers,
                        "prefer": "cheap", "hedge": setup.hedge, "on_deadline_risk": setup.on_deadline_risk,
                        "breaker": {"failures": setup.breaker_failures, "cooldown_ms": setup.cooldown_s * 1000},
                        "latency": {"stale_after_ms": 20_000 * setup.scale}},
            "log": {"enabled": False}}


def our_router(setup: Setup, base_url: str, names: list[str] | None = None, observers=()) -> Router:
    loaded = load_config(our_config(setup, base_url, names))
    built = {}
    for name, spec in loaded.config.backends.items():
        settings = spec.settings(name)
        # Retry backoff scaled like every other timing (BackendSettings' default is 0.25 s).
        fields = {f: getattr(settings, f) for f in settings.__dataclass_fields__}
        built[name] = OpenAIBackend(BackendSettings(**{**fields, "backoff_initial_s": 0.25 * setup.scale}))
    return Router(loaded, backends=built, source="api", log=False, observers=observers)


class Ours:
    """Our Router behind the driver's interface."""

    name = "route (ours)"

    def __init__(self, setup: Setup, base_url: str, bill: Bill, names: list[str] | None = None):
        self.setup, self.base_url, self.bill = setup, base_url, bill
        self.router = our_router(setup, base_url, names, observers=[self._on_attempt])

    def _on_attempt(self, attempt, decision) -> None:
        # Attempts run in tasks created inside `ask`, which inherit its context: the job.
        job = _CURRENT_JOB.get()
        if job is not None and attempt.completion is None and (
                attempt.cancelled or attempt.first_s is not None or isinstance(attempt.error, BackendTimeout)):
            self.bill.abandoned(attempt.backend, job, attempt.elapsed_s)

    async def warm_up(self, n: int = 5) -> None:
        for _ in range(n):
            await self.router.acomplete("warm up", model=WARMUP_MODEL)

    async def ask(self, job: Job) -> Outcome:
        start = time.perf_counter()
        token = _CURRENT_JOB.set(job)
        try:
            result = await self.router.acomplete(job.prompt, max_tokens=job.max_tokens, deadline_s=job.deadline_s)
        except Exception as exc:
            return Outcome(time.perf_counter() - start, False, why=_why(exc))
        finally:
            _CURRENT_JOB.reset(token)
        self.bill.answer(result.backend, result.completion.usage)
        # What failed before the answer (the fallback that explains a weaker tier answering).
        why = (", ".join(f"{e.backend}: {type(e).__name__}" for e in result.failures) + (f" of {result.decision.candidates}" if result.failures else "")
               or f"nothing failed; planned: {result.decision.reason} candidates {result.decision.candidates} risk {result.decision.plan.on_deadline_risk}")
        return Outcome(time.perf_counter() - start, True, result.backend, why)

    async def add_backend(self, name: str) -> None:
        """A backend added to the config: a restart that keeps what was learned (the store)."""
        names = [*self.router.config.backends.keys() - {WARMUP_MODEL}, name]
        old = self.router
        self.router = our_router(self.setup, self.base_url, names, observers=[self._on_attempt])
        for backend, model in old.latency.models.items():
            if backend in self.router.latency.models:
                self.router.latency.models[backend] = model
        await self.warm_up(1)

    async def close(self) -> None:
        await self.router.aclose()


# -- LiteLLM's Router -----------------------------------------------------------------------------

def _deployment(setup: Setup, base_url: str, name: str, group: str) -> dict:
    spec = setup.specs[name]
    return {"model_name": group, "model_info": {"id": name},
            "litellm_params": {"model": f"openai/{spec.model}", "api_base": base_url, "api_key": "simulated",
                               "input_cost_per_token": spec.price[0] / 1e6,
                               "output_cost_per_token": spec.price[1] / 1e6}}


class Theirs:
    """litellm.Router(routing_strategy="latency-based-routing") as its docs set it up: one model
    group per tier, routing_strategy_args (time window, lowest-latency buffer), pre-call checks,
    retries, cooldowns after `allowed_fails` for `cooldown_time`, fallbacks between tiers."""

    name = "litellm.Router"

    def __init__(self, setup: Setup, base_url: str, bill: Bill, names: list[str] | None = None):
        from backends.litellm_backend import load_litellm

        self.litellm = load_litellm()
        # The Router registers its latency logger in litellm's process-wide callback lists; they
        # are put back as they were on close, so runs do not pile up each other's loggers.
        self._saved = {name: list(getattr(self.litellm, name, None) or []) for name in _LITELLM_LISTS}
        self.setup, self.base_url, self.bill = setup, base_url, bill
        self.jobs_by_index: dict[int, Job] = {}
        self.router = self.litellm.Router(
            model_list=_model_list(setup, base_url, names or list(setup.specs)),
            routing_strategy="latency-based-routing",
            routing_strategy_args=dict(setup.litellm_args), enable_pre_call_checks=True,
            num_retries=setup.retries, retry_after=0, allowed_fails=setup.breaker_failures,
            cooldown_time=setup.cooldown_s, fallbacks=_fallbacks([tier for tier, _, _ in setup.tiers]))
        self.litellm.callbacks.append(_failure_logger(self))

    async def warm_up(self, n: int = 5) -> None:
        for _ in range(n):
            await self.router.acompletion(model=WARMUP_MODEL, messages=[{"role": "user", "content": "warm up"}])

    async def ask(self, job: Job) -> Outcome:
        start = time.perf_counter()
        kwargs: dict[str, Any] = {"max_tokens": job.max_tokens} if job.max_tokens else {}
        try:
            response = await self.router.acompletion(
                model=job.tier, messages=[{"role": "user", "content": job.prompt}], timeout=job.deadline_s,
                metadata={"bench_job": job.index}, **kwargs)
        except Exception as exc:
            return Outcome(time.perf_counter() - start, False, why=_why(exc))
        elapsed = time.perf_counter() - start
        name = (getattr(response, "_hidden_params", {}) or {}).get("model_id") or ""
        usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        self.bill.answer(name, usage)
        return Outcome(elapsed, True, name)

    async def add_backend(self, name: str) -> None:
        from litellm.types.router import Deployment

        tier = next(t for t, _, members in self.setup.tiers if name in members)
        self.router.add_deployment(Deployment(**_deployment(self.setup, self.base_url, name, tier)))

    async def close(self) -> None:
        for name, saved in self._saved.items():
            current = getattr(self.litellm, name, None)
            if isinstance(current, list):
                current[:] = saved


def _why(exc: BaseException) -> str:
    """A failure in a few words: its type, and the types of the attempts an exception group holds."""
    inner = getattr(exc, "exceptions", None)
    if not inner:
        return type(exc).__name__
    return f"{type(exc).__name__}({', '.join(sorted(type(e).__name__ for e in inner))})"


def _model_list(setup: Setup, base_url: str, names: list[str]) -> list[dict]:
    """One model group per tier, plus the warm-up model."""
    model_list = [_deployment(setup, base_url, n, tier) for tier, _, members in setup.tiers
                  for n in members if n in names]
    model_list.append({"model_name": WARMUP_MODEL, "model_info": {"id": WARMUP_MODEL},
                       "litellm_params": {"model": f"openai/{WARMUP_MODEL}", "api_base": base_url,
                                          "api_key": "simulated"}})
    return model_list


def _fallbacks(groups: list[str]) -> list[dict[str, list[str]]] | None:
    """Fallbacks as LiteLLM expresses them: a failed group falls to the stronger ones (nearest
    first), then to the weaker ones -- our best-effort order: quality first, then any answer."""
    if len(groups) < 2:
        return None
    return [{g: [*groups[i + 1:], *reversed(groups[:i])]} for i, g in enumerate(groups)]


def _failure_logger(theirs: Theirs):
    """A LiteLLM callback that bills every failed attempt that was generating (timeouts)."""
    from litellm.integrations.custom_logger import CustomLogger

    class FailureBill(CustomLogger):
        async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
            params = kwargs.get("litellm_params") or {}
            name = (params.get("model_info") or {}).get("id")
            job_index = (params.get("metadata") or {}).get("bench_job")
            if name is None or job_index is None or job_index not in theirs.jobs_by_index:
                return
            if not isinstance(kwargs.get("exception"), theirs.litellm.Timeout):
                return  # an error answer is not billed (the same rule as ours)
            elapsed = (end_time - start_time).total_seconds()
            theirs.bill.abandoned(name, theirs.jobs_by_index[job_index], elapsed)

    return FailureBill()


# -- driving ----------------------------------------------------------------------------------------

Event = Callable[[], Awaitable[None]]


async def drive(client: Ours | Theirs, jobs: list[Job], events: Mapping[int, Event] | None = None) -> list[Outcome]:
    """Open-loop arrivals at each job's `at_s`; `events[i]` runs just before job i is issued."""
    events = events or {}
    if isinstance(client, Theirs):
        client.jobs_by_index.update({j.index: j for j in jobs})
    start = time.perf_counter()
    tasks = []
    for job in jobs:
        delay = start + job.at_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if job.index in events:
            await events[job.index]()
        tasks.append(asyncio.create_task(client.ask(job)))
    return list(await asyncio.gather(*tasks))


def arrivals(n: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    at, out = 0.0, []
    for _ in range(n):
        at += rng.expovariate(rate)
        out.append(at)
    return out


# -- scoring ----------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def score(run: Run, tier_rank: Mapping[str, int], tier_of: Mapping[str, str]) -> dict[str, float]:
    """Per run: shares of deadline hits, quality misses (a weaker tier than the prompt's answered)
    and failures; p50/p95/p99 of latency capped at each request's deadline; the bill."""
    n = len(run.jobs)
    capped = [min(o.elapsed_s, j.deadline_s) for o, j in zip(run.outcomes, run.jobs)]
    hits = [o.ok and o.elapsed_s <= j.deadline_s for o, j in zip(run.outcomes, run.jobs)]
    weaker = [o.ok and tier_rank[tier_of.get(o.backend, j.tier)] < tier_rank[j.tier]
              for o, j in zip(run.outcomes, run.jobs)]
    return {
        "deadline_hits": sum(hits) / n,
        "quality_misses": sum(weaker) / n,
        "good": sum(h and not w for h, w in zip(hits, weaker)) / n,
        "failed": sum(not o.ok for o in run.outcomes) / n,
        "p50_s": percentile(capped, 0.50), "p95_s": percentile(capped, 0.95), "p99_s": percentile(capped, 0.99),
        "cost_usd": run.bill_usd,
    }
