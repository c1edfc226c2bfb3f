"""Where the user's config and data live. `ROUTE_HOME` overrides both (tests, portable installs)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_config_dir", "user_config_file", "user_data_dir"]

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
