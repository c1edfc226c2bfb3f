"""Secrets in config: written as `${NAME}` references, resolved from the environment when a
request is made, never stored. No project imports (a data-level helper of the interface).

    expand("https://x/v1?key=${GEMINI_KEY}")    -> the URL with the variable's value
    literal_secret_paths({"api_key": "sk-..."}) -> ["api_key"]: a key written into config
    dsn_secret("host=db password=hunter2")      -> "a password (password=...)": one in a DSN
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = ["MissingVariable", "dsn_secret", "env_references", "expand", "expand_all", "literal_secret_paths",
           "url_secret"]

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Names under which a credential usually travels: parameters, headers, query strings.
_SECRET_NAME = re.compile(r"(^|[-_])(api[-_]?key|key|token|access[-_]?token|secret|password|passwd|"
                          r"authorization|auth|credentials?|signature|sig)$", re.IGNORECASE)


class MissingVariable(LookupError):
    """A `${NAME}` reference whose variable is not set."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(name)


def env_references(value: Any) -> Iterator[str]:
    """Every variable name referenced as ${NAME} anywhere in `value` (strings, dicts, lists)."""
    if isinstance(value, str):
        yield from _REF.findall(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from env_references(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from env_references(item)


def expand(value: str) -> str:
    """`value` with each ${NAME} replaced by the variable's value; MissingVariable when unset."""
    if "${" not in value:
        return value

    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if not found:
            raise MissingVariable(match.group(1))
        return found

    return _REF.sub(one, value)


def expand_all(value: Any) -> Any:
    """expand() through dicts and lists."""
    if isinstance(value, str):
        return expand(value)
    if isinstance(value, Mapping):
        return {k: expand_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_all(v) for v in value]
    return value


def _is_literal(value: Any) -> bool:
    """A non-empty string that is more than ${NAME} references (and an auth scheme word before them)."""
    if not isinstance(value, str):
        return False
    rest = _REF.sub("", value)
    if rest != value:
        rest = re.sub(r"(?i)\b(bearer|basic|token)\b", "", rest)
    return bool(rest.strip(" :"))


def literal_secret_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Key paths in `value` whose name says credential and whose value is written out literally."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _SECRET_NAME.search(key) and _is_literal(item):
                found.append((*path, key))
            else:
                found.extend(literal_secret_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(literal_secret_paths(item, (*path, index)))
    return found


def url_secret(url: str) -> str | None:
    """What in `url` is a literal credential (a password, a key in the query), or None."""
    parts = urlsplit(url)
    if parts.password and _is_literal(parts.password):
        return "a password in the URL (user:password@host)"
    if parts.username and not parts.password and _is_literal(parts.username) and "@" in parts.netloc:
        return "credentials in the URL (user@host)"
    for name, item in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_NAME.search(name) and _is_literal(item):
            return f"the query parameter {name!r}"
    return None


# libpq's key=value form: password=secret or password='se cret'
_DSN_PASSWORD = re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S*)", re.IGNORECASE)


def dsn_secret(dsn: str) -> str | None:
    """What in a PostgreSQL connection string (URL or key=value form) is a literal password, or None."""
    if "://" in dsn:  # a user name alone is no secret here: libpq takes the password from elsewhere
        parts = urlsplit(dsn)
        if parts.password and _is_literal(parts.password):
            return "a password in the URL (user:password@host)"
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        return "the query parameter 'password'" if _is_literal(query.get("password")) else None
    match = _DSN_PASSWORD.search(dsn)
    if match and _is_literal(match.group(1).strip("'")):
        return "a password (password=...)"
    return None
