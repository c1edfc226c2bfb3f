"""Add, replace and remove `consortia:` entries in a YAML config file, keeping everything else
(comments, order, other sections) as the user wrote it.

Edits are made on the text, guided by the positions yaml.compose reports, and the result is
validated as a whole config before it is written (atomically), so a save that would break the
config (an unknown member, a cycle) changes nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from backends.errors import ConfigError, UsageError
from router.config_loader import LoadedConfig, parse_config

__all__ = ["add_entry", "entry_spans", "remove_entry", "write_config"]


def _consortia_node(text: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError("the config is not a YAML mapping; fix it before saving consortia into it")
    for key, value in root.value:
        if key.value == "consortia":
            return key, value
    return None, None


def _render(name: str, entry: dict[str, Any], indent: int) -> str:
    dumped = yaml.safe_dump({name: entry}, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100)
    pad = " " * indent
    return "".join(pad + line + "\n" for line in dumped.splitlines())


def entry_spans(text: str, mapping: yaml.MappingNode) -> dict[str, tuple[int, int]]:
    """name -> (start, end) character offsets of each entry, whole lines, without the blank or
    comment lines that trail it (they usually belong to what follows)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    keys = [(k.value, k.start_mark.line) for k, _ in mapping.value]
    end_line = mapping.end_mark.line if mapping.end_mark.column == 0 else mapping.end_mark.line + 1
    spans = {}
    for i, (name, first) in enumerate(keys):
        last = keys[i + 1][1] if i + 1 < len(keys) else min(end_line, len(lines))
        while last > first + 1 and (not lines[last - 1].strip() or lines[last - 1].lstrip().startswith("#")):
            last -= 1
        spans[name] = (starts[first], starts[last])
    return spans


def add_entry(text: str, name: str, entry: dict[str, Any], *, replace: bool = False) -> str:
    """`text` with consortium `name` set to `entry`. UsageError if it exists and not `replace`."""
    if not text.endswith("\n"):
        text += "\n"
    key, value = _consortia_node(text)
    if key is None:
        return text + "\nconsortia:\n" + _render(name, entry, 2)
    if not isinstance(value, yaml.MappingNode) or value.flow_style or not value.value:
        return _rewrite_section(text, key, value, name, entry, replace)
    spans = entry_spans(text, value)
    rendered = _render(name, entry, value.value[0][0].start_mark.column)
    if name not in spans:
        end = max(e for _, e in spans.values())
        return text[:end] + rendered + text[end:]
    if not replace:
        raise UsageError(f"consortium {name!r} already exists; pass --force to replace it")
    start, end = spans[name]
    return text[:start] + rendered + text[end:]


def _rewrite_section(text: str, key: yaml.Node, value: yaml.Node, name: str, entry: dict[str, Any],
                     replace: bool) -> str:
    """`consortia: {}`, an empty `consortia:` or a flow mapping: rewrite that one section as a
    block (a comment on its line is kept)."""
    existing = yaml.safe_load(text).get("consortia") or {}
    if not isinstance(existing, dict):
        raise ConfigError("`consortia:` is not a mapping; fix it before saving consortia into it")
    if name in existing and not replace:
        raise UsageError(f"consortium {name!r} already exists; pass --force to replace it")
    existing[name] = entry
    end = value.end_mark.index
    line_end = text.find("\n", end)  # text ends with a newline, so there is one
    comment = text[end:line_end] if text[end:line_end].strip().startswith("#") else ""
    body = "".join(_render(n, e, 2) for n, e in existing.items())
    return text[:key.start_mark.index] + "consortia:" + comment + "\n" + body + text[line_end + 1:]


def remove_entry(text: str, name: str) -> str:
    """`text` without consortium `name`. UsageError if there is no such entry."""
    key, value = _consortia_node(text)
    if key is None or not isinstance(value, yaml.MappingNode) or not any(k.value == name for k, _ in value.value):
        raise UsageError(f"no consortium {name!r} in this file; `route consortium list` shows the saved ones")
    if value.flow_style:
        data = yaml.safe_load(text)["consortia"]
        del data[name]
        start, end = value.start_mark.index, value.end_mark.index
        return text[:start] + yaml.safe_dump(data, default_flow_style=True).strip() + text[end:]
    start, end = entry_spans(text, value)[name]
    out = text[:start] + text[end:]
    if len(value.value) == 1:  # leave a valid, empty section rather than `consortia:` with nothing
        out = _empty_section(out)
    return out


def _empty_section(text: str) -> str:
    key, value = _consortia_node(text)
    if key is not None and (value is None or (isinstance(value, yaml.ScalarNode) and value.value == "")):
        line_end = text.find("\n", key.start_mark.index)
        return text[:key.start_mark.index] + "consortia: {}" + text[line_end:]
    return text


def write_config(path: Path, text: str) -> LoadedConfig:
    """Validate `text` as a whole config, then replace `path` atomically. Returns it loaded."""
    loaded = parse_config(text, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".yaml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return loaded
