"""`bookrag prepare piaf` (loader.importers.piaf): on the real PIAF file (BOOKRAG_PIAF, set by .ci/run)
and on a three-question file in the same format written here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bookrag.cli import main
from bookrag.errors import BookragError
from evaluation.evalset import load_evalset
from evaluation.metrics import contains_answer
from loader import frontmatter
from loader.check import check_corpus
from loader.chunking import paragraphs
from loader.importers import PreparedBook, book_to_prepare, importer_for
from loader.manifest import find_book
from tests.conftest import settings_for

PIAF = os.environ.get("BOOKRAG_PIAF")


def prepare_piaf(home: Path, source: Path) -> PreparedBook:
    """What `bookrag prepare piaf --from SOURCE` does: the registry names the importer."""
    s = settings_for(home, None)
    book = book_to_prepare(s.corpus, "piaf")
    return importer_for(book).prepare(s, book, source=source)


@pytest.mark.skipif(not PIAF or not Path(PIAF).exists(), reason="BOOKRAG_PIAF does not name the PIAF file")
def test_prepare_piaf_builds_a_complete_tree_and_evalset(tmp_path):
    prepared = prepare_piaf(tmp_path, Path(PIAF))
    root, evalset = prepared.root, prepared.evalset
    data = json.loads(Path(PIAF).read_text(encoding="utf-8"))["data"]
    sources = sorted(root.glob("*/source.md"))
    assert len(sources) == len(data) == 191 == len(prepared.files)
    paras = [p for f in sources for p in paragraphs(frontmatter.read(f)[1])]
    assert len(paras) == sum(len(a["paragraphs"]) for a in data) == 761
    problems, line = check_corpus(settings_for(tmp_path, None), ["piaf"])
    assert problems == [] and line.startswith("1 book, 383 files checked")
    items = load_evalset(evalset)
    assert len(items) == 3835
    for item in items[::97]:  # each fragment sits in exactly the gold paragraph of its article
        body = paragraphs(frontmatter.read(tmp_path / item.expected_files[0])[1])
        assert sum(contains_answer(p, item.answers) for p in body) >= 1


def test_a_missing_piaf_file_is_named(tmp_path):
    with pytest.raises(BookragError, match=r"nope\.json: not found \(the PIAF file is piaf-v1\.0\.json\)"):
        prepare_piaf(tmp_path, tmp_path / "nope.json")


SMALL = {
    "data": [
        {
            "title": "Les routes",
            "paragraphs": [
                {
                    "context": "Une route relie deux villes. Elle coûte cher.",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "Que relie une route ?",
                            "answers": [{"text": "deux villes"}],
                        }
                    ],
                },
                {"context": "Le péage paie  l'entretien", "qas": []},
            ],
        },
        {
            "title": "Les routes",
            "paragraphs": [
                {
                    "context": "Un second article au même titre. Fin.",
                    "qas": [
                        {"id": "q2", "question": "Combien d'articles ?", "answers": []},
                        {"id": "q3", "question": "Quel titre ?", "answers": [{"text": "même titre"}]},
                    ],
                }
            ],
        },
    ]
}


def test_the_cli_names_piaf_before_its_manifest_exists(tmp_path, monkeypatch, capsys):
    """PIAF's importer writes the manifest, so `bookrag prepare piaf` works on a checkout without
    corpus/piaf, and the manifest it writes describes the book the registry started from."""
    source = tmp_path / "small.json"
    source.write_text(json.dumps(SMALL, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setenv("BOOKRAG_HOME", str(tmp_path))
    assert main(["prepare", "piaf"]) == 1
    assert capsys.readouterr().err == "error: bookrag prepare piaf needs --from <path to piaf-v1.0.json>\n"
    assert main(["prepare", "piaf", "--from", str(source)]) == 0
    assert (
        capsys.readouterr().out
        == f"wrote {tmp_path / 'corpus' / 'piaf'} and {tmp_path / 'evals' / 'piaf.jsonl'}\n"
    )
    written = find_book(tmp_path / "corpus", "piaf")
    assert [s.slug for s in written.front_matter] == ["les-routes", "les-routes-2"]
    assert written.source_kind == "piaf" and importer_for(written) is importer_for(
        book_to_prepare(tmp_path / "corpus", "piaf")
    )
    assert [i.id for i in load_evalset(tmp_path / "evals" / "piaf.jsonl")] == ["q1", "q2", "q3"]
    problems, _ = check_corpus(settings_for(tmp_path, None), ["piaf"])
    assert problems == []
    # a bare `bookrag prepare` skips it: its input is named with --from
    assert main(["prepare"]) == 0
    assert capsys.readouterr().out == "piaf: skipped (piaf book: name it with --from EXPORT or --download)\n"
