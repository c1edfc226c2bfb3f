"""One redaction step for every string that leaves the process.

The router knows every secret it holds: the values of the environment variables its config
refers to (`api_key: ${NAME}`, `${NAME}` in URLs, headers and parameters) and the server's bearer
token. Upstreams often repeat a credential back in an error ("Incorrect API key provided: ..."),
so every error of every model call is redacted in the call path before anyone sees it -- the
caller, the CLI, the server's responses, traces, the request log and metrics -- and so is the
text of every answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from typing import TypeVar

from backends.errors import BackendError
from backends.secrets import env_references
from backends.types import Chunk, Completion, DraftChunk, FinalChunk, TextChunk

__all__ = ["MARK", "Redactor"]

MARK = "[REDACTED]"
_SHORTEST = 6  # shorter values would redact ordinary words; no real credential is this short

C = TypeVar("C", bound=Chunk)


class Redactor:
    """Replaces the current values of `variables` (read from the environment on each use, so a
    key exported after start-up is covered too) in text, errors, completions and chunks."""

    def __init__(self, variables: Iterable[str] = ()):
        self.variables: set[str] = set(variables)

    @classmethod
    def for_config(cls, config: object) -> Redactor:
        """Every variable a config's backends refer to."""
        backends = getattr(config, "backends", {})
        names: set[str] = set()
        for spec in backends.values():
            names.update(env_references(spec.model_dump()))
        return cls(names)

    def add(self, variable: str) -> None:
        self.variables.add(variable)

    def _secrets(self) -> list[str]:
        values = {os.environ.get(name, "") for name in self.variables}
        return sorted((v for v in values if len(v) >= _SHORTEST), key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self._secrets():
            if secret in text:
                text = text.replace(secret, MARK)
        return text

    def error(self, exc: BaseException) -> BaseException:
        """Redact an exception in place (its message, and a BackendError's body); an exception
        group's members too. Returns it, for `raise redactor.error(exc)`."""
        secrets = self._secrets()
        if not secrets:
            return exc
        exc.args = tuple(self.text(a) if isinstance(a, str) else a for a in exc.args)
        if isinstance(exc, BackendError) and exc.body:
            exc.body = self.text(exc.body)
        for inner in getattr(exc, "exceptions", ()):
            self.error(inner)
        return exc

    def completion(self, completion: Completion) -> Completion:
        if not self._secrets():
            return completion
        text = self.text(completion.text)
        return completion if text == completion.text else replace(completion, text=text)

    def chunk(self, chunk: C) -> C:
        if isinstance(chunk, (TextChunk, DraftChunk)):
            text = self.text(chunk.text)
            return chunk if text == chunk.text else replace(chunk, text=text)
        if isinstance(chunk, FinalChunk):
            completion = self.completion(chunk.completion)
            return chunk if completion is chunk.completion else replace(chunk, completion=completion)
        return chunk
