"""Where the user's config and data live. `ROUTE_HOME` overrides both (tests, portable installs)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["find_config", "user_config_dir", "user_config_file", "user_data_dir"]

_APP = "route"


def user_config_dir() -> Path:
    home = os.environ.get("ROUTE_HOME")
    if home:
        return Path(home) / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(_APP, appauthor=False))


def user_config_file() -> Path:
    return user_config_dir() / "config.yaml"


def user_data_dir() -> Path:
    home = os.environ.get("ROUTE_HOME")
    if home:
        return Path(home) / "data"
    import platformdirs

    return Path(platformdirs.user_data_dir(_APP, appauthor=False))


def find_config(explicit: str | os.PathLike | None = None) -> Path | None:
    """The config file to use, or None for the embedded default: `explicit` (--config), else
    $ROUTE_CONFIG, else ./config.yaml, else the user config. Here, not in router/config_loader.py,
    so that a command can ask without importing the config's schema (pydantic)."""
    from backends.errors import ConfigError

    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}. Check the path given to --config.")
        return path
    env = os.environ.get("ROUTE_CONFIG")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path} (from $ROUTE_CONFIG). Fix or unset ROUTE_CONFIG.")
        return path
    for candidate in (Path("config.yaml"), user_config_file()):
        if candidate.is_file():
            return candidate
    return None
