"""Feature values stay what they were: `extract()` against values recorded before a change.

`tests/data/features_expected.json` holds the values and words of 190 prompts (committed samples
in many scripts, code, lists, answer options, huge and odd text) as written by the extract() that
was shipped before the speed work. A change meant to alter features rewrites the file
(`python tests/test_feature_values.py --write`) in the same commit and says why.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

if __name__ == "__main__":  # run as a script from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.complexity.features import FEATURES, extract

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data"
EXPECTED = DATA / "features_expected.json"


def _records(name: str) -> dict[str, dict[str, Any]]:
    with open(DATA / name, encoding="utf-8") as f:
        return {r["id"]: r for r in map(json.loads, f)}


def _cases() -> list[dict[str, Any]]:
    cases = json.loads(EXPECTED.read_text(encoding="utf-8"))["cases"]
    files = {c["file"] for c in cases if "file" in c}
    records = {name: _records(name) for name in files}
    for c in cases:
        if "text" not in c:
            c["text"] = records[c["file"]][c["id"]][c["field"]]
    return cases


def _observed(case: dict[str, Any]) -> dict[str, Any]:
    values, words = extract(case["text"], *case["history"])
    digest = hashlib.sha256(" ".join(words).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return {"values": values, "words": len(words), "words_sha256": digest}


def test_every_feature_value_and_word_list_is_unchanged() -> None:
    cases = _cases()
    assert len(cases) >= 150 and any(not c["text"].isascii() for c in cases)
    for case in cases:
        got = _observed(case)
        assert len(got["values"]) == len(FEATURES)
        for name, want, value in zip(FEATURES, case["values"], got["values"]):
            assert value == pytest.approx(want, rel=0, abs=1e-12), (name, case["text"][:80])
        assert (got["words"], got["words_sha256"]) == (case["words"], case["words_sha256"]), case["text"][:80]
        # the decision asks for no words (it has no learned vocabulary): the same values
        assert extract(case["text"], *case["history"], words=False) == (got["values"], [])


def _write() -> None:
    """Record the current extract()'s values for the same prompts (the source line is kept)."""
    source = json.loads(EXPECTED.read_text(encoding="utf-8"))["source"]
    rows = []
    for case in _cases():
        text = case.pop("text") if "file" in case else case["text"]
        rows.append(json.dumps({**case, **_observed({**case, "text": text})}, ensure_ascii=True))
    EXPECTED.write_text(json.dumps({"source": source})[:-1] + ',\n "cases": [\n' + ",\n".join(rows) + "\n]}\n", encoding="utf-8")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    _write()
