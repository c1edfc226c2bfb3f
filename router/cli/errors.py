"""Exit codes, and the one place errors become a message and an exit code (never a traceback)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import typer

from backends.errors import RouteError

__all__ = ["EXIT_INTERRUPTED", "EXIT_NO_BACKEND", "EXIT_OK", "EXIT_OUTPUT_CLOSED", "EXIT_USAGE", "fail",
           "handle_errors"]

EXIT_OK, EXIT_USAGE, EXIT_NO_BACKEND, EXIT_INTERRUPTED = 0, 2, 3, 130
EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE: the status of a Unix tool whose reader went away


def fail(message: str, kind: str, *, json_mode: bool) -> None:
    from router.cli.output import Output

    Output(json_mode=json_mode).error(message, kind=kind)


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Map errors to a one-paragraph message and an exit code, never a traceback: ours carry
    their exit code (2 usage/config, 3 no backend); a file the user named that cannot be read or
    written is 2; Ctrl-C is one line and 130; output whose reader went away (`| head`) ends
    quietly with 141; anything else is a bug, shown in one line (set
    ROUTE_DEBUG=1 for the traceback), exit 1."""

    from router.cli.startup import resume_collection, resumes_collection

    resume_first = resumes_collection(command)

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        json_mode = bool(kwargs.get("json_output"))
        if resume_first:
            resume_collection()
        try:
            return command(*args, **kwargs)
        except RouteError as exc:
            fail(str(exc), type(exc).__name__, json_mode=json_mode)
            raise typer.Exit(getattr(exc, "exit_code", 1)) from None
        except KeyboardInterrupt:
            _cancelled(json_mode)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            _reader_gone()
            raise typer.Exit(EXIT_OUTPUT_CLOSED) from None
        except OSError as exc:
            fail(f"{exc}. Check the path and its permissions.", type(exc).__name__, json_mode=json_mode)
            raise typer.Exit(EXIT_USAGE) from None
        except Exception as exc:
            if os.environ.get("ROUTE_DEBUG") or type(exc).__module__.startswith(("click", "typer")):
                raise  # click's and typer's own exits and usage errors are theirs to show
            fail(f"{exc!r}: this is a bug in route; run again with ROUTE_DEBUG=1 for the traceback "
                 "and report it.", "InternalError", json_mode=json_mode)
            raise typer.Exit(1) from None

    return wrapper


def _reader_gone() -> None:
    """Whatever stdout still buffers goes nowhere, rather than failing again when the process
    flushes it at exit (the Python documentation's recipe for SIGPIPE)."""
    try:
        target = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test runner's buffer): nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, target)
    os.close(devnull)


def _cancelled(json_mode: bool) -> None:
    """Ctrl-C: one line on stderr (and the error document on stdout with --json)."""
    sys.stderr.write("route: cancelled\n")
    sys.stderr.flush()
    if json_mode:
        from router.cli.output import Output

        Output(json_mode=True).data({"error": {"type": "cancelled", "message": "interrupted (Ctrl-C)"}})
