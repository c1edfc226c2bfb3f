"""Add a backend to an existing config file's `backends:` section, keeping everything else
(comments, order, other sections) as the user wrote it: `route backend add`.

The block is one of `route init`'s (router/cli/starter.py), renamed or changed where asked, or
one written from the options given. The edit is made on the text, after the last entry of
`backends:`, at that section's indentation; the caller validates the whole result before writing.
"""

from __future__ import annotations

from typing import Any

import yaml

from backends.errors import ConfigError, UsageError
from router.consortium.userconfig import entry_spans

__all__ = ["add_backend", "backend_block"]


def backend_block(name: str, fields: dict[str, Any], comments: list[str] | None = None) -> str:
    """A `backends:` entry as YAML, indented by two spaces, in block style as route init writes."""
    dumped = yaml.safe_dump({name: fields}, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
    lines = [f"  {c}" if c.startswith("#") else f"  # {c}" for c in comments or []]
    lines += ["  " + line for line in dumped.splitlines()]
    return "\n".join(lines) + "\n"


def _reindent(block: str, indent: int) -> str:
    """`block` (written two spaces a level) at the file's own step: its backend names' column."""
    if indent == 2:
        return block
    out = []
    for line in block.splitlines(keepends=True):
        body = line.lstrip(" ")
        out.append(" " * ((len(line) - len(body)) * indent // 2) + body)
    return "".join(out)


def add_backend(text: str, name: str, block: str) -> str:
    """`text` with `block` (backend `name`, at two spaces) appended to `backends:`.

    UsageError when the name is taken by a backend or a consortium (they share one namespace)."""
    if not text.endswith("\n"):
        text += "\n"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is None:
        return "backends:\n" + block
    sections = _sections(root)
    for section in ("backends", "consortia"):
        _refuse_duplicate(sections.get(section), section, name)
    if "backends" not in sections:
        return "backends:\n" + block + "\n" + text
    key, value = sections["backends"]
    if _has_block_entries(value):
        return _append_entry(text, value, block)
    return _rewrite_section(text, key, value, block)


def _sections(root: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError("the config is not a YAML mapping; fix it before adding a backend to it")
    return {key.value: (key, value) for key, value in root.value}


def _has_block_entries(value: yaml.Node) -> bool:
    return isinstance(value, yaml.MappingNode) and not value.flow_style and bool(value.value)


def _append_entry(text: str, value: yaml.MappingNode, block: str) -> str:
    """`block` after the last entry of the block mapping `value`, indented as its entries are."""
    spans = entry_spans(text, value)
    end = max(e for _, e in spans.values())
    return text[:end] + _reindent(block, value.value[0][0].start_mark.column) + text[end:]


def _refuse_duplicate(section: tuple[yaml.Node, yaml.Node] | None, kind: str, name: str) -> None:
    if section is None or not isinstance(section[1], yaml.MappingNode):
        return
    for key, _ in section[1].value:
        if key.value == name:
            what = "backend" if kind == "backends" else "consortium"
            raise UsageError(f"there is already a {what} named {name!r} in this file (line {key.start_mark.line + 1}); "
                             "names are shared by backends and consortia. Choose another name, or edit that entry.")


def _rewrite_section(text: str, key: yaml.Node, value: yaml.Node, block: str) -> str:
    """`backends: {}`, an empty `backends:` or a flow mapping: the section as a block, the entries
    it had first (a comment on its line is kept)."""
    existing = (yaml.safe_load(text) or {}).get("backends") or {}
    if not isinstance(existing, dict):
        raise ConfigError("`backends:` is not a mapping; fix it before adding a backend to it")
    end = value.end_mark.index
    line_end = text.find("\n", end)  # text ends with a newline, so there is one
    comment = text[end:line_end] if text[end:line_end].strip().startswith("#") else ""
    body = "".join(backend_block(n, e) for n, e in existing.items()) + block
    return text[:key.start_mark.index] + "backends:" + comment + "\n" + body + text[line_end + 1:]
