"""docs/reference/consortium.md: every key of a consortium, written from router/consortium/spec.py
(`python -m router.cli.reference consortium`), each with what it does, and kept current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from router.cli.reference import consortium, main
from router.consortium.spec import ConsortiumConfig, MemberSpec

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "consortium.md"


def _rows(text: str, section: str) -> dict[str, list[str]]:
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): [c.strip() for c in m.group(2).split("|")]
            for m in re.finditer(r"^\| `([\w.\[\]]+)` \|(.*)\|$", body, re.M)}


def test_every_key_of_a_consortium_and_of_a_member_has_a_row_saying_what_it_does():
    text = consortium()
    for section, model in (("## `consortia.NAME`", ConsortiumConfig), ("## A member's long form", MemberSpec)):
        rows = _rows(text, section)
        assert list(rows) == list(model.model_fields), section
        assert all(row[-1] for row in rows.values()), [k for k, r in rows.items() if not r[-1]]
    assert _rows(text, "## `consortia.NAME`")["quorum"][:2] == ["int or none", "`None`"]


def test_the_committed_page_is_current_and_a_stale_one_is_caught(tmp_path, capsys):
    assert PAGE.read_text(encoding="utf-8") == consortium()
    stale = tmp_path / "consortium.md"
    stale.write_text(consortium().replace("`grace_s`", "`grace`"))
    assert main(["--check", "consortium", str(stale)]) == 1
    assert "python -m router.cli.reference consortium" in capsys.readouterr().err
