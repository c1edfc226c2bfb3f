"""Secrets in config: written as `${NAME}` references, resolved from the environment when a
request is made, never stored. No project imports (a data-level helper of the interface).

    expand("https://x/v1?key=${GEMINI_KEY}")    -> the URL with the variable's value
    literal_secret_paths({"api_key": "sk-..."}) -> ["api_key"]: a key written into config
    url_secret("https://x/v1#key=AIza...")      -> "the fragment parameter 'key'": one in a URL
    dsn_secret("host=db password=hunter2")      -> "a password (password=...)": one in a DSN

A credential is recognised by its name (`api_key`, `Authorization`, `Cookie`, `?key=`) or, under
any name, by its form: the prefixes providers give their keys (sk-, AIza, ghp_, xoxb-, AKIA, a
JWT ...). Header values, which exist to carry credentials, are held to more: an auth scheme with
a literal (`Bearer abc...`), a cookie pair named like a session, or a long random-looking token
(letters and digits, 24 or more, as generated keys are) is refused there too. The literal part
of a value is what is judged: `${NAME}` references are removed first.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

__all__ = ["MissingVariable", "credential_form", "dsn_secret", "env_references", "expand", "expand_all",
           "literal_secret_paths", "url_secret"]

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Names under which a credential usually travels: parameters, headers, query strings, cookies.
_SECRET_NAME = re.compile(r"(^|[-_])(api[-_]?key|key|token|access[-_]?token|secret|password|passwd|"
                          r"authorization|auth|credentials?|signature|sig|cookie|session|sid)$", re.IGNORECASE)
# Credentials whose form gives them away, whatever they are called.
_KNOWN_FORM = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_-]{16,}"                      # OpenAI, Anthropic (sk-ant-...), DeepSeek, Mistral ...
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"      # Stripe
    r"|xox[abprs]-[A-Za-z0-9-]{10,}"              # Slack
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[A-Za-z0-9_-]{30,}"                    # Google
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"                 # AWS access key ids
    r"|hf_[A-Za-z0-9]{30,}"                       # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # a JWT
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r")")
_AUTH_SCHEME = re.compile(r"(?i)^\s*(?:bearer|basic|token|digest|negotiate|apikey|api-key)\s+\S")
_COOKIE_PAIR = re.compile(r"([^=;,\s]+)\s*=\s*([^;,]*)")
_TOKEN = re.compile(r"[A-Za-z0-9+/=]{24,}")  # '-', '_' and '.' end a token: words joined by them are no key


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
    """A non-empty string that is more than ${NAME} references (and an auth scheme word, or the
    names of cookie pairs, `session=${S}`, around them)."""
    if not isinstance(value, str):
        return False
    rest = _REF.sub("", value)
    if rest != value:
        rest = re.sub(r"(?i)\b(bearer|basic|token)\b", "", rest)
        rest = re.sub(r"[^=;,\s]+=(?=\s*(;|,|$))", "", rest)  # a pair whose value was a reference
    return bool(rest.strip(" :;,"))


def _literal_part(value: str) -> str:
    return _REF.sub("", value)


def _random_looking(token: str) -> bool:
    """Letters and digits mixed, with the spread of a generated key rather than of words."""
    if not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
        return False
    counts = [token.count(c) for c in set(token)]
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts)
    return entropy >= 3.0


def credential_form(value: Any, *, header: bool = False) -> bool:
    """Whether the literal part of `value` looks like a credential whatever it is called; with
    `header`, also an auth scheme with a literal, a session-like cookie pair, or a long
    random-looking token."""
    if not isinstance(value, str):
        return False
    text = _literal_part(value)
    if _KNOWN_FORM.search(text):
        return True
    if not header:
        return False
    if _AUTH_SCHEME.match(text):
        return True
    if any(_SECRET_NAME.search(name) and val.strip() for name, val in _COOKIE_PAIR.findall(text)):
        return True
    return any(_random_looking(token) for token in _TOKEN.findall(text))


def literal_secret_paths(value: Any, path: tuple[Any, ...] = (), *, headers: bool = False) -> list[tuple[Any, ...]]:
    """Key paths in `value` whose name says credential and whose value is written out literally,
    or whose value has a credential's form (`headers`: the stricter checks of header values)."""
    found: list[tuple[Any, ...]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            named = isinstance(key, str) and _SECRET_NAME.search(key) and _is_literal(item)
            if named or credential_form(item, header=headers):
                found.append((*path, key))
            else:
                found.extend(literal_secret_paths(item, (*path, key), headers=headers))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if credential_form(item, header=headers):
                found.append((*path, index))
            else:
                found.extend(literal_secret_paths(item, (*path, index), headers=headers))
    return found


def url_secret(url: str) -> str | None:
    """What in `url` is a literal credential (a password, a key in the path, the query or the
    fragment), or None."""
    parts = urlsplit(url)
    found = _userinfo_secret(parts)
    if found is not None:
        return found
    if credential_form(parts.path):  # a path carries ids (accounts, deployments) as often as keys: forms only
        return "a credential in the URL's path"
    found = _parameter_secret("query", parts.query) or _parameter_secret("fragment", parts.fragment)
    if found is None and credential_form(parts.fragment):
        return "a credential in the URL's fragment"
    return found


def _userinfo_secret(parts: SplitResult) -> str | None:
    if parts.password and _is_literal(parts.password):
        return "a password in the URL (user:password@host)"
    if parts.username and not parts.password and _is_literal(parts.username) and "@" in parts.netloc:
        return "credentials in the URL (user@host)"
    return None


def _parameter_secret(where: str, part: str) -> str | None:
    """A `name=value` of a query or fragment whose name or value says credential."""
    for name, item in parse_qsl(part, keep_blank_values=True):
        if (_SECRET_NAME.search(name) and _is_literal(item)) or credential_form(item, header=True):
            return f"the {where} parameter {name!r}"
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
