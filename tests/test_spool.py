"""The local spool (router/store/spool.py) on its own: a live process's file is never taken from
it, a gone process's is; lines are read in order from where the database left off; a line still
being written is not read; a damaged line is skipped, not replayed; files are 0600. Real files
and real flock locks (two Spool objects hold two open file descriptions, as two processes do)."""

from __future__ import annotations

import stat

import pytest

from router.store.records import COLUMNS, RequestRecord, row_for
from router.store.spool import Spool

pytestmark = pytest.mark.unit


def _rows(*prompts: str) -> list[tuple]:
    return [row_for(RequestRecord(source="api", status="ok", prompt=p, ts=1.0)) for p in prompts]


def _prompts(batches) -> list[str]:
    at = COLUMNS.index("prompt")
    return [row[at] for _, batch in batches for row in batch.rows]


def test_a_live_spool_is_never_claimed_and_a_gone_one_is(tmp_path):
    alive, other = Spool(tmp_path / "db"), Spool(tmp_path / "db")
    alive.append(_rows("a1", "a2"))
    assert other.claim_orphans() == 0  # locked by its (live) owner
    [path] = (tmp_path / "db").iterdir()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    alive.close()  # as its process ending would: the lock goes with it
    assert other.claim_orphans() == 1
    assert other.backlog and _prompts(other.batches({}, 10)) == ["a1", "a2"]


def test_batches_start_where_the_database_left_off_and_finish_deletes_what_was_replayed(tmp_path):
    spool = Spool(tmp_path / "db")
    spool.append(_rows("r0", "r1", "r2"))
    spool.append(_rows("r3", "r4"))
    [name] = spool.names()
    batches = list(spool.batches({name: 3}, size=1))
    assert _prompts(batches) == ["r3", "r4"] and [b.upto for _, b in batches] == [4, 5]
    assert spool.finish() == []  # nothing marked replayed yet
    for spool_file, batch in batches:
        spool_file.replayed = batch.upto
    assert spool.finish() == [name] and not spool.backlog and not list((tmp_path / "db").iterdir())


def test_a_line_being_written_is_not_read_and_a_damaged_one_is_skipped(tmp_path, caplog):
    writer = Spool(tmp_path / "db")
    writer.append(_rows("whole"))
    [path] = (tmp_path / "db").iterdir()
    with path.open("ab") as f:
        f.write(b"not json\n" + b'{"prompt": "half')  # a damaged line, then one still being written
    writer.close()
    reader = Spool(tmp_path / "db")
    assert reader.claim_orphans() == 1
    batches = list(reader.batches({}, size=10))
    assert _prompts(batches) == ["whole"] and batches[-1][1].upto == 2
    assert "damaged line" in caplog.text
