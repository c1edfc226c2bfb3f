"""Config loading: the shipped config is valid, the search order holds, and every malformed
config produces one clear message with the file and line to fix."""

from __future__ import annotations

import textwrap

import pytest

from backends.errors import ConfigError
from router.config_loader import EMBEDDED, find_config, load_config, parse_config

pytestmark = pytest.mark.unit

VALID = """\
backends:
  local:
    kind: openai
    model: gemma
    base_url: http://127.0.0.1:8000/v1
    decoding: diffusion
  hosted:
    kind: litellm
    model: anthropic/claude-sonnet-4-5
    api_key: ${ANTHROPIC_API_KEY}
    price: {input: 3, output: 15}
routing:
  tiers:
    - name: local
      below: 0.5
      backends: [local]
    - name: hosted
      backends: [hosted]
"""


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(textwrap.dedent(text), "cfg.yaml")
    return caught.value


def test_valid_config_loads_with_settings():
    loaded = parse_config(VALID, "cfg.yaml")
    hosted = loaded.config.backends["hosted"].settings("hosted")
    assert hosted.api_key_env == "ANTHROPIC_API_KEY"
    assert hosted.price.output_per_mtok == 15
    assert loaded.config.backends["local"].decoding == "diffusion"
    assert loaded.line_of("backends", "hosted", "model") == 9


def test_shipped_config_is_valid_and_is_the_embedded_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./config.yaml here, no user config: the embedded default
    loaded = load_config()
    assert loaded.path == EMBEDDED
    assert {"diffusiongemma", "mercury-2", "frontier"} <= set(loaded.config.backends)


def test_search_order_explicit_then_env_then_cwd_then_user(tmp_path, monkeypatch, route_home):
    monkeypatch.chdir(tmp_path)
    user = route_home / "config" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(VALID)
    assert find_config() == user
    cwd = tmp_path / "config.yaml"
    cwd.write_text(VALID)
    assert find_config().resolve() == cwd.resolve()
    env = tmp_path / "env.yaml"
    env.write_text(VALID)
    monkeypatch.setenv("ROUTE_CONFIG", str(env))
    assert find_config() == env
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text(VALID)
    assert find_config(explicit) == explicit


def test_missing_explicit_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match="config file not found: .*nope.yaml.*--config"):
        load_config(tmp_path / "nope.yaml")


def test_missing_env_file_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTE_CONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=r"\$ROUTE_CONFIG"):
        load_config()


def test_dict_source_is_validated():
    with pytest.raises(ConfigError, match="required key 'routing' is missing"):
        load_config({"backends": {"a": {"kind": "openai", "model": "m"}}})


# (config text, line the error must point at, regex the message must match)
MALFORMED = [
    pytest.param("backends: [\n", 2, r"invalid YAML", id="yaml-syntax"),
    pytest.param("backends:\n  a:\n    kind: openai\n   model: x\n", 4, r"invalid YAML.*indentation", id="yaml-indent"),
    pytest.param("- just\n- a list\n", 1, r"must be a YAML mapping", id="not-a-mapping"),
    pytest.param("", 1, r"must be a YAML mapping", id="empty-file"),
    pytest.param(VALID.replace("    price:", "    prce:"), 11, r"unknown key 'prce'.*Did you mean 'price'", id="typo-key"),
    pytest.param(VALID.replace("kind: litellm", "kind: anthropik"), 8, r"backends.hosted.kind must be one of 'openai'", id="bad-kind"),
    pytest.param(VALID.replace("    model: gemma\n", ""), 2, r"required key 'model' is missing", id="missing-model"),
    pytest.param(VALID.replace("${ANTHROPIC_API_KEY}", "sk-ant-secret123"), 10, r"api_key must name an environment variable", id="literal-key"),
    pytest.param(VALID.replace("input: 3", "input: -3"), 11, r"price.input: input should be greater than or equal to 0", id="negative-price"),
    pytest.param(VALID.replace("input: 3", "input: cheap"), 11, r"price.input: input should be a valid number", id="price-not-number"),
    pytest.param(VALID.replace("http://127.0.0.1:8000/v1", "127.0.0.1:8000"), 5, r"base_url must start with http", id="url-scheme"),
    pytest.param(VALID.replace("decoding: diffusion", "decoding: denoise"), 6, r"decoding must be one of", id="bad-decoding"),
    pytest.param(VALID.replace("backends: [hosted]", "backends: [hosetd]"), 18, r"names 'hosetd'.*Did you mean 'hosted'", id="unknown-tier-backend"),
    pytest.param(VALID.replace("below: 0.5", "below: 1.5"), 15, r"below must be a score between 0 and 1", id="band-out-of-range"),
    pytest.param(VALID.replace("      below: 0.5\n", ""), 14, r"tier 'local' needs `below`", id="missing-below"),
    pytest.param(VALID.replace("      backends: [hosted]\n", "      below: 0.9\n      backends: [hosted]\n"), 18, r"last tier .* must have no `below`", id="last-tier-below"),
    pytest.param(VALID.replace("      backends: [local]\n", "      backends: []\n"), 16, r"backends: list should have at least 1 item", id="empty-tier"),
    pytest.param(VALID.replace("routing:\n  tiers:", "routing:\n  tires:"), 13, r"unknown key 'tires'.*Did you mean 'tiers'", id="typo-section"),
    pytest.param("backends: {}\nrouting:\n  tiers: [{name: a, backends: [x]}]\n", 1, r"backends: dictionary should have at least 1 item", id="no-backends"),
    pytest.param(VALID.replace("    decoding: diffusion\n", "    decoding: diffusion\n    timeout_s: 0\n"), 7, r"timeout_s: input should be greater than 0", id="zero-timeout"),
    pytest.param(VALID.replace("      backends: [hosted]\n", "      below: 0.9\n      backends: [hosted]\n    - name: top\n      backends: [hosted]\n").replace("below: 0.5", "below: 0.95"),
                 18, r"edges must ascend: 0.9 comes after 0.95", id="descending-edges"),
    pytest.param(VALID.replace("- name: hosted", "- name: local"), 17, r"tier name 'local' is used twice", id="duplicate-tier"),
]


@pytest.mark.parametrize("text, line, pattern", MALFORMED)
def test_malformed_config_message_has_file_line_and_fix(text, line, pattern):
    error = _error(text)
    assert error.path == "cfg.yaml"
    assert error.line == line, str(error)
    assert str(error).startswith(f"cfg.yaml:{line}: ")
    import re

    assert re.search(pattern, str(error), re.S), str(error)
    assert "\n" not in str(error).strip(), "one paragraph, no traceback-like lines"


def test_literal_key_is_never_echoed():
    error = _error(VALID.replace("${ANTHROPIC_API_KEY}", "sk-ant-secret123"))
    assert "sk-ant-secret123" not in str(error)


def test_several_problems_are_all_mentioned():
    text = VALID.replace("input: 3", "input: -3").replace("decoding: diffusion", "decoding: x")
    message = str(_error(text))
    assert "1 more problem" in message and "price.input" in message and "decoding" in message
