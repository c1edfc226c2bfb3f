"""YAML for config files, with the limits a hostile or careless file must not get past.

PyYAML's SafeLoader is safe against code execution but not against size: a duplicate key
silently wins, an alias bomb (`b: [*a, *a, ...]` nine levels deep) expands to billions of
nodes in anything that walks the document, and a few thousand nested `[` exhaust Python's
recursion. `load_yaml` refuses each of those with a ConfigError naming the line, before the
document is built:

- a key given twice in one mapping (both lines named);
- nesting deeper than MAX_NESTING (checked while composing, so the composer's own recursion
  never gets there);
- aliases whose expansion would exceed MAX_EXPANDED_NODES nodes (counted on the node graph
  with memoisation, so counting costs one pass whatever the expansion).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from backends.errors import ConfigError

__all__ = ["MAX_EXPANDED_NODES", "MAX_NESTING", "load_yaml"]

MAX_NESTING = 64  # mappings and lists inside each other; real configs use under 10
MAX_EXPANDED_NODES = 100_000  # after aliases are expanded; the shipped config has about 300


class _Limited(Exception):
    """A limit was hit; carries the 1-based line."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts nesting while composing and refuses duplicate keys."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                mark = self.peek_event().start_mark
                raise _Limited(f"the document is nested more than {MAX_NESTING} levels deep; no route setting "
                               "needs that many levels: flatten it", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        _check_duplicates(node)
        return super().construct_mapping(node, deep=deep)


def _check_duplicates(node: MappingNode) -> None:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, ScalarNode):
            continue
        key = key_node.value
        line = key_node.start_mark.line + 1
        if key in seen:
            raise _Limited(f"the key {key!r} appears twice in one mapping, on line {seen[key]} and line {line}; "
                           "YAML would silently keep only the last one: remove or rename one of them", line)
        seen[key] = line


def _too_big(root: Node) -> Node | None:
    """The first node that stands for more than MAX_EXPANDED_NODES nodes once every alias is
    expanded, or None. Iterative and memoised by node identity, so a bomb costs as much to
    measure as its source text."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[id(node)] > MAX_EXPANDED_NODES:
                return node
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return None


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str, path: str) -> tuple[Node | None, Any]:
    """(the composed node tree, for line numbers; the loaded data). Raises ConfigError for the
    limits above, and lets yaml.YAMLError through for plain syntax errors."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        big = _too_big(root)
        if big is not None:
            raise _Limited(f"YAML aliases (*name) expand this document to more than {MAX_EXPANDED_NODES:,} "
                           "nodes, which looks like an alias bomb; write the repeated parts out, or refer "
                           "to them by name (a backend or consortium name) instead of by alias", big.start_mark.line + 1)
        return root, loader.construct_document(root)
    except _Limited as exc:
        raise ConfigError(str(exc), path=path, line=exc.line) from None
    finally:
        loader.dispose()
