"""`bookrag prepare piaf` on the real PIAF file (BOOKRAG_PIAF, set by .ci/run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluation.evalset import load_evalset
from evaluation.metrics import contains_answer
from evaluation.piaf import prepare_piaf
from loader import frontmatter
from loader.check import check_corpus
from loader.chunking import paragraphs
from tests.conftest import settings_for

PIAF = os.environ.get("BOOKRAG_PIAF")


@pytest.mark.skipif(not PIAF or not Path(PIAF).exists(), reason="BOOKRAG_PIAF does not name the PIAF file")
def test_prepare_piaf_builds_a_complete_tree_and_evalset(tmp_path):
    s = settings_for(tmp_path, None)
    root, evalset = prepare_piaf(s, Path(PIAF))
    data = json.loads(Path(PIAF).read_text(encoding="utf-8"))["data"]
    sources = sorted(root.glob("*/source.md"))
    assert len(sources) == len(data) == 191
    paras = [p for f in sources for p in paragraphs(frontmatter.read(f)[1])]
    assert len(paras) == sum(len(a["paragraphs"]) for a in data) == 761
    problems, line = check_corpus(s, ["piaf"])
    assert problems == [] and line.startswith("1 books, 383 files checked")
    items = load_evalset(evalset)
    assert len(items) == 3835
    for item in items[::97]:  # each fragment sits in exactly the gold paragraph of its article
        body = paragraphs(frontmatter.read(tmp_path / item.expected_files[0])[1])
        assert sum(contains_answer(p, item.answers) for p in body) >= 1


def test_a_missing_piaf_file_is_named(tmp_path):
    from bookrag.errors import BookragError

    with pytest.raises(BookragError, match=r"nope\.json: not found \(the PIAF file is piaf-v1\.0\.json\)"):
        prepare_piaf(settings_for(tmp_path, None), tmp_path / "nope.json")
