"""One path for every model call (router/calls.py): consortium members and arbiters learn
latency and feed breakers like routed calls, budgets count upstream requests (retries included),
nesting shares one concurrency limit, and a backend kind defined outside the package works from YAML.

Against the simulated server over real HTTP, counting at the simulator's /sim/stats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends import register_kind, registry
from backends.assembly import Delta
from backends.base import Backend
from backends.deadline import Deadline
from backends.errors import AllBackendsFailed, ConfigError
from backends.params import Strict
from backends.types import Request, last_user_text
from router import Router
from router.config_loader import parse_config
from tests.helpers import use_arbiter

pytestmark = pytest.mark.integration


def _backends(sim, **extra: object) -> str:
    opts = ", ".join(f"{k}: {v}" for k, v in extra.items())
    sep = ", " if opts else ""
    return f"""\
backends:
  member: {{kind: openai, model: glm-5.2, base_url: "{sim.base_url}"{sep}{opts}}}
  judge: {{kind: openai, model: mercury-2, base_url: "{sim.base_url}"}}
routing:
  tiers: [{{name: all, backends: [member]}}]
"""


def test_member_and_arbiter_calls_are_learned_and_persisted(sim, tmp_path):
    use_arbiter(sim)
    config = tmp_path / "panel.yaml"
    config.write_text(_backends(sim) + "consortia:\n  panel: {members: [member*3], arbiter: judge}\n")
    for _ in range(2):
        router = Router.from_config(str(config), persist=True)
        router.complete("Explain CRDTs.", model="panel")
        router.close()
    shown = subprocess.run([sys.executable, "-m", "router.cli", "models", "--json", "-c", str(config)],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())},
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    rows = {row["name"]: row for row in json.loads(shown.stdout)["backends"]}
    assert rows["member"]["latency"]["samples"] >= 6
    assert rows["judge"]["latency"]["samples"] >= 2
    assert rows["member"]["breaker"] == "closed"


async def test_member_failures_open_the_breaker_as_routed_failures_do(sim):
    use_arbiter(sim)
    text = _backends(sim, max_retries=0) + "  breaker: {failures: 3, cooldown_ms: 60000}\n" \
        + "consortia:\n  panel: {members: [member*3], arbiter: judge, retries: 0, quorum: 1}\n"
    router = Router(parse_config(text, "panel.yaml"), log=False)
    sim.set_faults("glm-5.2", ["500", "500", "500"])
    with pytest.raises(AllBackendsFailed):
        await router.acomplete("hi", model="panel")
    assert router.state()["member"]["breaker"] == "open"
    assert router.state()["member"]["latency"]["failure_rate"] > 0
    # An open breaker is honoured by the next member call: nothing more reaches the server.
    before = sim.stats("glm-5.2")["requests"]
    with pytest.raises(AllBackendsFailed) as caught:
        await router.acomplete("hi", model="panel")
    assert "circuit breaker is open" in str(caught.value)
    assert sim.stats("glm-5.2")["requests"] == before
    await router.aclose()


async def test_budget_bounds_upstream_requests_retries_included(sim):
    use_arbiter(sim)
    text = _backends(sim, max_retries=2) + "  breaker: {failures: 50}\n" \
        + "consortia:\n  panel: {members: [member*3], arbiter: judge, budget: 6, retries: 2, quorum: 1}\n"
    router = Router(parse_config(text, "panel.yaml"), log=False)
    sim.set_faults("glm-5.2", ["500"] * 20)
    with pytest.raises(AllBackendsFailed) as caught:
        await router.acomplete("hi", model="panel")
    # quorum 1: members keep retrying until the budget stops them (one call stays reserved for the arbiter)
    upstream = sim.stats("glm-5.2")["requests"] + sim.stats("mercury-2")["requests"]
    assert upstream == 5
    assert "BudgetExhausted" in str(caught.value)
    await router.aclose()


def test_a_config_whose_planned_calls_exceed_its_budget_is_refused_at_load(sim):
    too_many = _backends(sim) + "consortia:\n  panel: {members: [member*3], arbiter: judge, max_iterations: 2, budget: 5}\n"
    with pytest.raises(ConfigError, match=r"panel\.yaml:\d+: .*plans 8 model calls per run.*budget of 5"):
        parse_config(too_many, "panel.yaml")
    # The default budget refuses a runaway fan-out (3 levels of *64 is 266,305 calls).
    nested = _backends(sim) + """consortia:
  l1: {members: [member*64], arbiter: judge}
  l2: {members: [l1*64], arbiter: judge}
  l3: {members: [l2*64], arbiter: judge}
"""
    with pytest.raises(ConfigError, match=r"'l1' plans 65 model calls per run.*default budget of 64"):
        parse_config(nested, "nested.yaml")


async def test_nested_consortia_never_exceed_the_global_concurrency_limit(sim):
    sim.update_profile("glm-5.2", ttft_s=0.05, tokens_per_s=None)
    use_arbiter(sim)
    text = _backends(sim).replace("routing:\n", "routing:\n  max_concurrency: 8\n") + """consortia:
  inner: {members: [member*8], arbiter: judge, max_concurrency: 8}
  outer: {members: [inner*8], arbiter: judge, max_concurrency: 8, budget: 80}
"""
    router = Router(parse_config(text, "nested.yaml"), log=False)
    completion = (await router.acomplete("hi", model="outer")).completion
    assert completion.metadata["calls"] == 8 * 9 + 1
    assert sim.stats("glm-5.2")["peak_in_flight"] == 8  # the limit is reached at the server, never passed
    assert router.calls.peak_in_flight == 8  # members and arbiters together, at any moment
    await router.aclose()


# -- a backend kind defined here, in the test file alone --------------------------------------


class EchoOptions(Strict):
    shout: bool = False


class EchoBackend(Backend):
    """Echoes the prompt, one word per delta: only the wire call, the base does the rest."""

    kind = "echo-test"
    options_model = EchoOptions

    async def _wire(self, request: Request, deadline: Deadline, *, stream: bool) -> AsyncIterator[Delta]:
        text = last_user_text(request.messages)
        if self.settings.options.get("shout"):
            text = text.upper()
        for i, word in enumerate(text.split(" ")):
            yield Delta(text=word if i == 0 else " " + word)


async def test_a_toy_backend_kind_works_from_yaml(monkeypatch):
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))  # registered for this test only
    register_kind("echo-test", EchoBackend)
    text = """\
backends:
  echo: {kind: echo-test, model: echo-1, options: {shout: true}}
routing:
  tiers: [{name: all, backends: [echo]}]
"""
    router = Router(parse_config(text, "echo.yaml"), log=False)
    result = await router.acomplete("hello there")
    assert result.text == "HELLO THERE" and result.backend == "echo"
    assert result.completion.metadata["usage_estimated"] is True  # assembled by the base class
    chunks = [c async for c in router.astream("a b c")]
    assert "".join(getattr(c, "text", "") for c in chunks[:-1]) == "A B C"
    with pytest.raises(ConfigError, match=r"echo\.yaml:2: .*shuot.*Did you mean 'shout'"):
        parse_config(text.replace("shout", "shuot"), "echo.yaml")
    await router.aclose()
