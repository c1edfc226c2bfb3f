"""Find, parse and validate the config, turning every problem into one ConfigError with file and line.

Search order: an explicit path (`--config`), `$ROUTE_CONFIG`, `./config.yaml`, the user config
dir, then the default embedded in the package.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from backends.errors import ConfigError
from router.config import Config
from router.paths import find_config
from router.yaml_safe import load_yaml

__all__ = ["LoadedConfig", "find_config", "load_config", "parse_config"]

EMBEDDED = "<embedded default>"


@dataclass(frozen=True)
class LoadedConfig:
    config: Config
    path: str  # file path, or EMBEDDED
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)  # key path -> 1-based line

    def line_of(self, *path: Any) -> int | None:
        return _line_for(self.lines, path)


def _embedded_text() -> str:
    from importlib.resources import files

    packaged = files("router").joinpath("default_config.yaml")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    # Editable installs and source checkouts: the repo's top-level config.yaml is the default.
    return (Path(__file__).resolve().parent.parent / "config.yaml").read_text(encoding="utf-8")


def load_config(source: str | os.PathLike | dict | None = None) -> LoadedConfig:
    """Load from a dict, a path, or the search order above."""
    if isinstance(source, dict):
        return LoadedConfig(_validate(source, "<dict>", {}), "<dict>", {})
    path = find_config(source)
    if path is None:
        return parse_config(_embedded_text(), EMBEDDED)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", path=str(path)) from None
    return parse_config(text, str(path))


def parse_config(text: str, path: str) -> LoadedConfig:
    try:
        root, data = load_yaml(text, path)  # with duplicate-key, nesting and alias limits
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"invalid YAML: {problem}. Check indentation and quoting near this line "
            "(values containing ': ' or '#' need quotes).",
            path=path,
            line=mark.line + 1 if mark else None,
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "the config must be a YAML mapping with `backends:` and `routing:` sections "
            f"(got {type(data).__name__}). See the shipped config.yaml for an example.",
            path=path,
            line=1,
        )
    lines: dict[tuple, int] = {}
    _index_lines(root, (), lines)
    return LoadedConfig(_validate(data, path, lines), path, lines)


def _validate(data: dict, path: str, lines: dict[tuple, int]) -> Config:
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, path, lines) from None
    _check_references(config, path, lines)
    _check_backend_kinds(config, path, lines)
    return config


def _check_backend_kinds(config: Config, path: str, lines: dict[tuple, int]) -> None:
    """Each backend's kind is registered, and its `params` / `options` fit that kind's schema."""
    from backends.registry import kind_of, kinds

    for name, spec in config.backends.items():
        if spec.kind not in kinds():
            known = ", ".join(repr(k) for k in kinds())
            raise ConfigError(f"backends.{name}.kind must be one of {known} (got {spec.kind!r}).{_did_you_mean(spec.kind, kinds())}",
                              path=path, line=_line_for(lines, ("backends", name, "kind")))
        kind = kind_of(spec.kind)
        for section, schema in (("params", kind.params), ("options", kind.options)):
            try:
                schema.model_validate(getattr(spec, section))
            except ValidationError as exc:
                raise _section_error(exc, schema, (name, section), spec.kind, path, lines) from None


def _section_error(exc: ValidationError, schema: Any, where: tuple[str, str], kind: str, path: str,
                   lines: dict[tuple, int]) -> ConfigError:
    name, section = where
    error = exc.errors()[0]
    key = str(error["loc"][0]) if error["loc"] else ""
    line = _line_for(lines, ("backends", name, section, *error["loc"])) or _line_for(lines, ("backends", name, section))
    if error["type"] == "extra_forbidden":
        allowed = sorted(schema.model_fields)
        hint = _did_you_mean(key, allowed)
        extra = (" Provider-specific parameters no schema can know go in `passthrough:`, which is sent verbatim."
                 if section == "params" else "")
        return ConfigError(f"backends.{name}.{section}: unknown key {key!r} for kind {kind!r}.{hint} "
                           f"Allowed: {', '.join(allowed) or 'none'}.{extra}", path=path, line=line)
    return ConfigError(f"backends.{name}.{section}.{key}: {error['msg']} (got {error.get('input')!r}).",
                       path=path, line=line)


def _check_references(config: Config, path: str, lines: dict[tuple, int]) -> None:
    known = set(config.backends) | set(config.consortia)
    clash = sorted(set(config.backends) & set(config.consortia))
    if clash:
        raise ConfigError(
            f"{clash[0]!r} is both a backend and a consortium; names share one namespace, rename one.",
            path=path, line=_line_for(lines, ("consortia", clash[0])),
        )
    from router.consortium.graph import check_consortia

    check_consortia(config.consortia, config.backends, path, lambda *loc: _line_for(lines, loc))
    _check_tiers(config, path, lines)
    _check_learning(config, path, lines)
    for alias, target in config.aliases.items():
        if target != "auto" and target not in known:
            raise ConfigError(f"aliases.{alias} names {target!r}, which is not `auto`, a backend or a consortium."
                              f"{_did_you_mean(target, known)} Known: {', '.join(sorted(known))}.",
                              path=path, line=_line_for(lines, ("aliases", alias)))
    for t, tier in enumerate(config.routing.tiers):
        for b, name in enumerate(tier.backends):
            if name not in known:
                raise ConfigError(
                    f"routing.tiers[{t}] ({tier.name}) names {name!r}, which is neither a backend nor a "
                    f"consortium.{_did_you_mean(name, known)} Known: {', '.join(sorted(known))}.",
                    path=path, line=_line_for(lines, ("routing", "tiers", t, "backends", b)),
                )


def _check_tiers(config: Config, path: str, lines: dict[tuple, int]) -> None:
    """Tier names are unique, only the last tier is open-ended, and band edges ascend."""
    tiers = config.routing.tiers
    seen: dict[str, int] = {}
    for t, tier in enumerate(tiers):
        at = ("routing", "tiers", t)
        if tier.name in seen:
            raise ConfigError(f"tier name {tier.name!r} is used twice (tiers {seen[tier.name]} and {t}); "
                              "tier names must be unique.", path=path, line=_line_for(lines, at + ("name",)))
        seen[tier.name] = t
        problem = _band_problem(tier, last=t == len(tiers) - 1)
        if problem:
            line = _line_for(lines, at + ("below",)) if tier.below is not None else _line_for(lines, at)
            raise ConfigError(problem, path=path, line=line)
    # bands on the routing scorer must ascend; a boundary with a head of its own has its own scale
    edges = [(t, tier.below) for t, tier in enumerate(tiers[:-1]) if isinstance(tier.below, float) and tier.scorer is None]
    for (_, low), (t, high) in zip(edges, edges[1:]):
        if high <= low:
            raise ConfigError(f"tier `below` edges must ascend: {high} comes after {low}; order the tiers from "
                              "the lowest band to the highest.", path=path, line=_line_for(lines, ("routing", "tiers", t, "below")))


def _check_learning(config: Config, path: str, lines: dict[tuple, int]) -> None:
    """`routing.learn`: a judge that exists (or one to default to), tiers to learn between."""
    learn = config.routing.learn
    if learn is None:
        return
    from router.learning.config import default_judge, learning_problem

    at = ("routing", "learn")
    known = set(config.backends) | set(config.consortia)
    if learn.judge is not None and learn.judge not in known:
        raise ConfigError(f"routing.learn.judge names {learn.judge!r}, which is neither a backend nor a consortium."
                          f"{_did_you_mean(learn.judge, known)} Known: {', '.join(sorted(known))}.",
                          path=path, line=_line_for(lines, (*at, "judge")))
    if learn.shadow_rate > 0 and learn.judge is None and default_judge(config) is None:
        raise ConfigError("routing.learn.shadow_rate needs a judge, and no diffusion backend above the lowest tier "
                          "is there to default to; name one with `judge: BACKEND`.",
                          path=path, line=_line_for(lines, (*at, "shadow_rate")))
    problem = learning_problem(config)
    if problem is not None:
        where, message = problem
        raise ConfigError(message, path=path, line=_line_for(lines, where))


def _band_problem(tier, *, last: bool) -> str | None:
    if last and tier.below is not None and tier.below != 1.0:
        return (f"the last tier ({tier.name!r}) must have no `below`: it takes every score above the other "
                "bands. Remove its `below`.")
    if last and tier.scorer is not None:
        return (f"the last tier ({tier.name!r}) has no boundary above it for a `scorer` to decide; move the "
                "`scorer` to the tier below the boundary it should decide, or remove it.")
    if not last and tier.below is None:
        return f"tier {tier.name!r} needs `below` (only the last tier may omit it); add `below: 0.5` or similar."
    return None


# -- line bookkeeping ---------------------------------------------------------------------


def _index_lines(node: yaml.Node | None, path: tuple, lines: dict[tuple, int]) -> None:
    if node is None:
        return
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _index_lines(value_node, path + (key,), lines)
            # The key's own line is the better pointer for "this key is wrong".
            lines[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, path + (i,), lines)


def _line_for(lines: dict[tuple, int], loc: tuple) -> int | None:
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


# -- messages -----------------------------------------------------------------------------


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


_ADDING = ("`route backend add NAME` adds a provider's block (or any backend) to an existing config, and "
           "`route init --backend NAME` writes a whole new one around it.")


def _field_name(loc: tuple) -> str:
    return loc[-1] if loc else ""


def _unknown_key(error: dict) -> str:
    loc = error["loc"]
    allowed = _allowed_keys(loc[:-1])
    hint = _did_you_mean(_field_name(loc), allowed) if allowed else ""
    known = f" Allowed keys here: {', '.join(sorted(allowed))}." if allowed else ""
    if len(loc) == 1 and isinstance(error.get("input"), dict) and "kind" in error["input"]:
        return f"unknown key {_field_name(loc)!r}: it looks like a backend, which goes under `backends:`. {_ADDING}"
    return f"unknown key {_field_name(loc)!r}.{hint}{known}"


def _missing(error: dict) -> str:
    loc = error["loc"]
    if loc in (("routing",), ("backends",)):
        return (f"required key {_field_name(loc)!r} is missing: a config has `backends:` and `routing:` (its tiers), "
                f"so a provider's block alone is not one. {_ADDING}")
    return f"required key {_field_name(loc)!r} is missing; add it."


def _not_one_of(error: dict) -> str:
    expected = error.get("ctx", {}).get("expected", "")
    return f"{_dotted(error['loc'])} must be one of {expected} (got {error.get('input')!r})."


def _message(error: dict) -> str:
    return error["msg"].removeprefix("Value error, ")


def _invalid_value(error: dict) -> str:
    return f"{_dotted(error['loc'])}: {_message(error)}."


def _pydantic_sentence(error: dict) -> str:
    loc, message, got = error["loc"], _message(error), error.get("input")
    # a whole section is too long to echo, and a key must never be
    shown = "" if isinstance(got, (dict, list)) or "api_key" in loc else f" (got {got!r})"
    return f"{_dotted(loc)}: {message[0].lower() + message[1:]}{shown}."


# pydantic's error type -> the sentence for it; any other type is `_pydantic_sentence`'s
_EXPLAINED: dict[str, Callable[[dict], str]] = {
    "extra_forbidden": _unknown_key, "missing": _missing, "literal_error": _not_one_of,
    "value_error": _invalid_value, "assertion_error": _invalid_value}


def _explain(error: dict) -> str:
    return _EXPLAINED.get(error["type"], _pydantic_sentence)(error)


def _allowed_keys(parent_loc: tuple) -> set[str]:
    """Field names of the model at `parent_loc` in the schema, for did-you-mean hints."""
    from router import config as schema

    model: Any = schema.Config
    for part in parent_loc:
        if isinstance(part, int) or model is None:
            continue
        info = getattr(model, "model_fields", {}).get(part)
        if info is None:
            # dict[str, Model] levels: the key is a user-chosen name
            continue
        model = _model_in(info.annotation)
    return set(getattr(model, "model_fields", {})) if model is not None else set()


def _model_in(annotation: Any) -> Any:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _config_error(exc: ValidationError, path: str, lines: dict[tuple, int]) -> ConfigError:
    # An unknown key usually causes the "missing" error next to it: report the typo first.
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    line = _line_for(lines, _strip_union_tags(first["loc"]))
    message = _explain({**first, "loc": _strip_union_tags(first["loc"])})
    more = len(errors) - 1
    if more:
        others = "; ".join(
            f"line {_line_for(lines, _strip_union_tags(e['loc']))}: "
            f"{_explain({**e, 'loc': _strip_union_tags(e['loc'])}).replace(' ' + _ADDING, '')}"  # said once
            for e in errors[1:4]
        )
        message += f" Also {more} more problem{'s' if more > 1 else ''}: {others}"
    return ConfigError(message, path=path, line=line)


def _strip_union_tags(loc: tuple) -> tuple:
    # pydantic adds the union member's type name to locations ("float", "literal['calibrated']").
    return tuple(p for p in loc if not (isinstance(p, str) and (p in {"float", "int", "str"} or p.startswith(("literal[", "function-")))))
