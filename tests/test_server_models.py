"""GET /v1/models lists `auto`, every backend with its capabilities, context window and decoding,
every consortium and every alias; `aliases:` targets are checked at load with file and line."""

from __future__ import annotations

import httpx
import pytest

from backends.errors import ConfigError
from router.config_loader import parse_config
from router.server import RouteServer
from tests.helpers import make_router

pytestmark = pytest.mark.integration


def test_models_carry_capabilities(sim):
    router = make_router(sim, aliases={"claude-sonnet-4-6": "auto", "claude-*": "small"})
    with RouteServer(router) as srv:
        listing = httpx.get(f"{srv.base_url}/models").json()["data"]
        one = httpx.get(f"{srv.base_url}/models/small").json()
    models = {m["id"]: m for m in listing}
    assert list(models)[0] == "auto" and models["auto"]["route"]["routes_to"] == ["low", "high"]
    small = models["small"]["route"]
    assert small["kind"] == "openai" and small["decoding"] == "autoregressive"
    assert small["capabilities"] == {"tools": True, "seed": True, "vision": True, "drafts": True}
    assert models["offline"]["route"]["capabilities"]["tools"] is False
    assert models["pair"]["owned_by"] == "route:consortium" and models["pair"]["route"]["judging"] == "rank"
    assert models["claude-sonnet-4-6"]["route"] == {"kind": "alias", "target": "auto"}
    assert "claude-*" not in models  # a glob is not a model a client can pick from a list
    assert one == models["small"]


def test_alias_to_an_unknown_name_fails_at_load_with_its_line():
    text = """\
backends:
  local: {kind: openai, model: gemma}
routing:
  tiers: [{name: all, backends: [local]}]
aliases:
  claude-sonnet-4-6: auto
  claude-haiku-4-5: locl
"""
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "cfg.yaml")
    message = str(caught.value)
    assert "aliases.claude-haiku-4-5" in message and "'locl'" in message and "local" in message
    assert caught.value.line == 7
