"""The request log holds prompts and answers: its files are readable by their owner only (0600,
directories route creates 0700), whatever the umask, and a log written by an older version with
looser modes is made private when it is next opened. Real files, real SQLite."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from router.config_loader import load_config
from router.core import Router
from router.store import RequestRecord, Store

pytestmark = pytest.mark.integration


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual default, under which files come out world-readable
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_log_and_the_directories_made_for_it_are_private(sim, tmp_path, umask_022):
    db = tmp_path / "new" / "logs" / "route.db"
    config = {"backends": {"small": {"kind": "openai", "model": "m-small", "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "only", "backends": ["small"]}]}, "log": {"path": str(db)}}
    with Router(load_config(config)) as router:
        router.complete("a secret prompt")
        assert router.request_log is not None and router.request_log.flush()
        assert [r["prompt"] for r in Store(db).recent(1)] == ["a secret prompt"]
        files = {p.name: _mode(p) for p in db.parent.iterdir()}
    assert files == {"route.db": 0o600, "route.db-wal": 0o600, "route.db-shm": 0o600}
    assert _mode(tmp_path / "new") == 0o700 and _mode(tmp_path / "new" / "logs") == 0o700


def test_the_default_data_dir_is_private(route_home, umask_022):
    Store().log(RequestRecord(source="api", status="ok", prompt="p"))
    data = route_home / "data"
    assert _mode(data) == 0o700 and _mode(data / "route.db") == 0o600
    assert _mode(route_home) == 0o755  # made by the test, not by route: left alone


def test_an_existing_world_readable_log_is_made_private_when_opened(tmp_path, umask_022):
    db = tmp_path / "logs" / "old.db"
    Store(db).log(RequestRecord(source="api", status="ok", prompt="p"))
    for path in db.parent.iterdir():
        path.chmod(0o644)  # as an older route left it under umask 022
    Store(db).log(RequestRecord(source="api", status="ok", prompt="q"))
    assert {p.name: _mode(p) for p in db.parent.iterdir()} == {"old.db": 0o600, "old.db-wal": 0o600,
                                                              "old.db-shm": 0o600}
