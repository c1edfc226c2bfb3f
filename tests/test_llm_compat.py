"""llm-consortium's vocabulary read as ours: `-m MODEL:N` and `-n N`, its judging names, its
percent confidence, and the JSON its `consortium_configs` rows hold (router/consortium/llm_compat.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from router.consortium.llm_compat import entry_from_llm_consortium, judging_of, members_of, threshold_of
from router.consortium.spec import ConsortiumConfig

pytestmark = pytest.mark.unit

DB = Path(__file__).parent / "data" / "llm_consortium_0.8.db"


def test_members_take_llm_consortiums_counts_and_ours():
    assert members_of(["glm-5.2"], 5) == ["glm-5.2*5"]
    assert members_of(["k2.6:5", "glm-5.2*2", "mercury-2"], 1) == ["k2.6*5", "glm-5.2*2", "mercury-2"]
    assert members_of(["a", "a:2"], 1) == ["a*3"]  # a name given twice adds up, as llm-consortium does


def test_a_colon_that_is_part_of_a_models_name_stays_in_it():
    assert members_of(["llama3:8b"], 2) == ["llama3:8b*2"]  # not a count: not digits
    assert members_of(["qwen:7"], 1, known={"qwen:7"}) == ["qwen:7"]  # a backend of that name
    assert members_of(["qwen:7"], 1) == ["qwen*7"]  # otherwise llm-consortium's reading


def test_judging_and_confidence_in_either_vocabulary():
    assert [judging_of(v) for v in ("rank", "synthesis", "default", "DEFAULT")] == ["rank", "synthesis"] + ["synthesis"] * 2
    with pytest.raises(ValueError, match="rank or synthesis"):
        judging_of("vote")
    assert (threshold_of(0.8), threshold_of(80), threshold_of(1)) == (0.8, 0.8, 1)
    with pytest.raises(ValueError, match="percent"):
        threshold_of(120)


def test_every_row_llm_consortium_0_8_wrote_becomes_a_valid_entry():
    with sqlite3.connect(DB) as db:
        rows = dict(db.execute("SELECT name, config FROM consortium_configs").fetchall())
    entries = {name: entry_from_llm_consortium(json.loads(config)) for name, config in rows.items()}
    assert entries["cns-glm"] == ({"members": ["glm-5.2*5"], "arbiter": "mercury-2", "judging": "rank",
                                   "confidence_threshold": 0.8, "min_iterations": 1, "max_iterations": 3}, [])
    meta, notes = entries["cns-meta-glm-kimi"]
    assert (meta["members"], meta["judging"], meta["system"]) == (["cns-glm", "cns-k26"], "synthesis", "Answer plainly.")
    assert notes == []
    for entry, _ in entries.values():
        ConsortiumConfig.model_validate(entry)


def test_what_has_no_counterpart_is_named_and_left_out():
    entry, notes = entry_from_llm_consortium({"models": {"a": 2}, "arbiter": "b", "strategy": "voting",
                                              "embedding_backend": "openai"})
    assert entry["members"] == ["a*2"] and len(notes) == 2 and "voting" in notes[0]
    with pytest.raises(ValueError, match="no arbiter"):
        entry_from_llm_consortium({"models": {"a": 1}})
