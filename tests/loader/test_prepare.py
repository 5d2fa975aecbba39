"""`bookrag prepare` on the real books (BOOKRAG_SOURCES, set by .ci/run to ../shared/books)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from bookrag.config import DEFAULT_HOME, Settings
from bookrag.errors import BookragError
from loader import frontmatter
from loader.importers.gutenberg import prepare, prepare_sections, raw_path, read_text, section_ranges
from loader.manifest import book_tree, find_book

SOURCES = os.environ.get("BOOKRAG_SOURCES")
needs_books = pytest.mark.skipif(not SOURCES, reason="BOOKRAG_SOURCES is not set (the raw books folder)")
CORPUS = DEFAULT_HOME / "corpus"


def settings(home: Path, sources: Path | None) -> Settings:
    return Settings(
        home=home,
        database_url=None,
        sources=sources,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )


def words(text: str) -> list[str]:
    text = re.sub(r"\[Note \w+: ?|\[\^?\w+\]:?|\[TN-[A-Z]+\]", " ", text)
    text = text.replace("--", " ").replace("—", " ")
    return re.findall(r"\w+", text.lower())


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> dict[str, list]:
    if not SOURCES:
        pytest.skip("BOOKRAG_SOURCES is not set")
    home = tmp_path_factory.mktemp("prep")
    shutil.copytree(CORPUS, home / "corpus", ignore=shutil.ignore_patterns("*.jsonl", "source.md"))
    s = settings(home, Path(SOURCES))
    out = {}
    for slug in ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"):
        book = find_book(s.corpus, slug)
        paths = prepare(s, book).files
        out[slug] = (s, book, paths)
    return out


def chapters(book) -> list[tuple[str, list[str]]]:
    return [(p.slug, [sec.title for sec in p.sections if sec.kind == "chapter"]) for p in book.parts]


@needs_books
def test_bastiat_structure(prepared):
    s, book, paths = prepared["bastiat-sophismes-economiques"]
    (p1, t1), (p2, t2) = chapters(book)
    assert (p1, len(t1), p2, len(t2)) == ("premiere-serie", 22, "deuxieme-serie", 17)
    assert [sec.kind for sec in book.parts[0].sections][::23] == ["introduction", "conclusion"]
    assert t1[6] == "Pétition des fabricants de chandelles" and t1[16] == "Un chemin de fer négatif"
    assert t2[2] == "Les deux haches" and t2[16] == "Domination par le travail"
    assert len(paths) == 41
    body = frontmatter.read(
        s.home / "corpus/bastiat-sophismes-economiques/premiere-serie/chapitre-01-abondance-disette/source.md"
    )[1]
    assert body.startswith(
        "Qu'est ce qui vaut mieux pour l'homme et pour la société, l'abondance ou la disette?"
    )


@needs_books
def test_tocqueville_structure(prepared):
    s, book, paths = prepared["tocqueville-democratie-en-amerique"]
    assert [(slug, len(t)) for slug, t in chapters(book)] == [
        ("premiere-partie-mouvement-intellectuel", 21),
        ("deuxieme-partie-sentiments", 20),
        ("troisieme-partie-moeurs", 26),
        ("quatrieme-partie-societe-politique", 8),
    ]
    assert [f.slug for f in book.front_matter] == ["avertissement"]
    titles = dict(chapters(book))
    assert titles["deuxieme-partie-sentiments"][1] == "De l'individualisme dans les pays démocratiques"
    assert (
        titles["quatrieme-partie-societe-politique"][5]
        == "Quelle espèce de despotisme les nations démocratiques ont à craindre"
    )
    assert len(paths) == 77


@needs_books
@pytest.mark.parametrize("slug", ["bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"])
def test_fidelity_every_section_keeps_its_words(prepared, slug):
    """The words of each section in the raw file (boilerplate, footnote markers and labels
    removed) are exactly the words of its source.md, in the same order."""
    s, book, _ = prepared[slug]
    texts = {raw.name: read_text(raw_path(s, book, raw), book.encoding) for raw in book.files}
    ranges = section_ranges(book, texts)
    nodes = [n for n in book_tree(book) if n.node_type == "source"]
    assert len(ranges) == len(nodes)
    for node in nodes:
        key = node.section.slug if node.part is None else f"{node.part.slug}/{node.section.slug}"
        f, head, body_start, end = ranges[key]
        assert texts[f][head].strip() == node.section.start, key
        raw = "\n".join(texts[f][body_start:end])
        meta, body = frontmatter.read(s.home / node.source_file)
        assert words(body) == words(raw), key
        assert (
            meta["parent_source_file"] == node.parent_source_file
            and meta["heading_path"] == node.heading_path
        )


@needs_books
def test_boilerplate_and_tables_are_gone(prepared):
    for _slug, (_s, _book, paths) in prepared.items():
        for p in paths:
            text = frontmatter.read(p)[1]
            assert "Gutenberg" not in text and "TABLE DES MATIÈRES" not in text, p
            assert "\r" not in text and "[Note " not in text and "--" not in text, p


@needs_books
def test_footnotes_stay_after_their_paragraph(prepared):
    s, _book, _ = prepared["bastiat-sophismes-economiques"]
    body = frontmatter.read(
        s.home / "corpus/bastiat-sophismes-economiques/premiere-serie/introduction/source.md"
    )[1]
    paras = body.split("\n\n")
    i = next(i for i, p in enumerate(paras) if "l'oeil de l'esprit[^2]" in p)
    assert paras[i + 1].startswith(
        "[^2]: Cet aperçu a donné lieu plus tard au pamphlet _Ce qu'on voit et ce qu'on ne voit pas_"
    )


@needs_books
def test_prepare_is_idempotent(prepared):
    s, book, paths = prepared["bastiat-sophismes-economiques"]
    before = {p: p.stat().st_mtime_ns for p in paths}
    prepare(s, book)
    assert {p: p.stat().st_mtime_ns for p in paths} == before


@needs_books
def test_raw_file_with_another_sha256_is_refused(tmp_path):
    book = find_book(CORPUS, "bastiat-sophismes-economiques")
    folder = tmp_path / "bastiat-oeuvres-tome-4"
    folder.mkdir()
    data = (Path(SOURCES) / "bastiat-oeuvres-tome-4" / "pg46625-8.txt").read_bytes()
    (folder / "pg46625-8.txt").write_bytes(data.replace(b"SOPHISMES", b"SOPHISME!", 1))
    with pytest.raises(BookragError) as info:
        prepare_sections(settings(DEFAULT_HOME, tmp_path), book)
    msg = str(info.value)
    assert msg.startswith(f"{folder / 'pg46625-8.txt'} has sha256 ")
    assert msg.endswith(
        "expects b56307b4c94b532368933edd940ee3844b93d8e9b7aae7e9e21cc1cbb0a9e878: a different edition "
        "or a damaged file; fetch the file the manifest names"
    )


def test_missing_raw_file(tmp_path):
    book = find_book(CORPUS, "tocqueville-democratie-en-amerique")
    with pytest.raises(BookragError) as info:
        prepare_sections(settings(DEFAULT_HOME, tmp_path), book)
    assert str(info.value) == (
        f"raw book file missing: {tmp_path}/tocqueville-democratie-1840/pg30515-8.txt "
        "(or run with --download to fetch https://www.gutenberg.org/files/30515/30515-8.txt)"
    )
