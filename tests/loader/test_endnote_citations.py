"""The paragraph that calls an end note cites it (issue 36, decision 0036): its sidecar chunk's
`cites` names the note's source.md, `load` puts it in rag.citations, rag.cites / get_citations /
search's `cited` expansion follow it, and a search hit on a note names the calling chapter and
paragraph. The 1835 volume is read at run time from BOOKRAG_SOURCES; the small book is invented.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pytest

from bookrag import db
from bookrag.cli import main
from bookrag.config import load_settings
from loader import endnotes
from loader.importers.gutenberg import raw_path, read_text
from loader.load import load
from loader.manifest import find_book
from loader.sidecars import sidecar_path
from tests.loader.test_endnotes import SLUG, book_text, write_raw

RAW_1835 = ("tocqueville-democratie-1835", "pg30514-8.txt")


def build(home: Path, raw: Path, slug: str, capsys: pytest.CaptureFixture) -> str:
    """add (policy none: nothing embedded), prepare, extractive summaries, sidecars; the book folder."""
    assert main(["add", str(raw), "--slug", slug]) == 0
    toml = home / "corpus" / slug / "book.toml"
    toml.write_text(
        re.sub(r"(?m)^policy = .*$", 'policy = "none"', toml.read_text(encoding="utf-8")), encoding="utf-8"
    )
    for argv in (
        ["prepare", slug],
        ["summarize", slug, "--provider", "extractive"],
        ["sidecars", str(home / "corpus" / slug)],
    ):
        assert main(argv) == 0, argv
    capsys.readouterr()
    return f"corpus/{slug}"


def note_citations(conn: psycopg.Connection, book: str) -> list[tuple[str, int, int, str, str]]:
    """(citing file, chunk, paragraph, its text, cited note) for every paragraph citing a note."""
    return conn.execute(
        "SELECT n.source_file, n.chunk_index, n.paragraph, n.content, c.cited_source_file FROM rag.citations c "
        "JOIN rag.hierarchical_content_nodes n USING (source_file, chunk_index) "
        "WHERE n.level = 0 AND n.book = %s ORDER BY n.node_order, n.chunk_index, c.cited_source_file",
        (book,),
    ).fetchall()


def test_1835_volume_every_call_cites_its_note(tmp_path: Path, pg_url: str, monkeypatch, capsys) -> None:
    settings = load_settings()
    if settings.sources is None or not (settings.sources / RAW_1835[0] / RAW_1835[1]).exists():
        pytest.skip("BOOKRAG_SOURCES does not hold the 1835 volume")
    raw = settings.sources / RAW_1835[0] / RAW_1835[1]
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    slug = "tocqueville-1835"
    build(home, raw, slug, capsys)
    book = find_book(home / "corpus", slug)
    lines = read_text(raw_path(load_settings(), book, book.files[0]), book.encoding)
    found = endnotes.find(raw.name, lines)
    assert (
        found is not None and len(found.notes) == 4 and len(found.calls) == 4
    )  # (_A_) … (_D_), each called once
    notes = endnotes.note_files(book)
    with db.connect(pg_url) as conn:
        load(conn, home, [home / "corpus" / slug])
        rows = note_citations(conn, slug)
        # every call in the raw text is one citation of its note, from the paragraph that holds it
        assert sorted(cited for *_, cited in rows) == sorted(notes[c.label] for c in found.calls)
        for _source_file, _chunk, paragraph, content, cited in rows:
            label = next(k for k, v in notes.items() if v == cited)
            assert f"(_{label}_)" in content
            title = conn.execute(
                "SELECT heading_path FROM rag.hierarchical_content_nodes WHERE source_file = %s "
                "AND chunk_index = 0",
                (cited,),
            ).fetchone()[0]
            assert title.endswith(f", § {paragraph})"), title  # "… > Note B (Chapitre VIII, § 80)"
        # the author's own summaries (decision 0035) are marked on their rows
        assert conn.execute(
            "SELECT count(DISTINCT (source_file, paragraph)) FROM rag.hierarchical_content_nodes "
            "WHERE book = %s AND kind = 'author_summary'",
            (slug,),
        ).fetchone() == (45,)
        # no paragraph without a call cites anything
        assert conn.execute(
            "SELECT count(*) FROM rag.citations c JOIN rag.hierarchical_content_nodes n "
            "USING (source_file, chunk_index) WHERE n.level = 0 AND n.content !~ '\\(_[A-Z0-9]+_\\)'"
        ).fetchone() == (0,)
        # rag.cites, rag.get_citations and search's `cited` follow the call to the note's rows
        source_file, chunk, paragraph, content, _ = rows[0]
        assert conn.execute("SELECT rag.cites(%s, %s)", (source_file, chunk)).fetchone()[0] == [
            {"source_file": rows[0][4], "paragraphs": None}
        ]
        got = conn.execute(
            "SELECT source_file, chunk_index FROM rag.get_citations(%s, %s)", (source_file, chunk)
        ).fetchall()
        assert got and {f for f, _ in got} == {rows[0][4]}
        words = " ".join(content.split()[:12])
        hits = conn.execute(
            "SELECT source_file, paragraph, cites, cited FROM rag.search(%s, NULL, 'bm25', 3, "
            "p_book => %s, p_levels => ARRAY[0], p_expand => ARRAY['cited'])",
            (words, slug),
        ).fetchall()
        hit = next(h for h in hits if (h[0], h[1]) == (source_file, paragraph))
        assert (
            hit[2] == [{"source_file": rows[0][4], "paragraphs": None}]
            and hit[3][0]["source_file"] == rows[0][4]
        )


@pytest.fixture
def small(tmp_path: Path, pg_url: str, monkeypatch, capsys) -> tuple[Path, str]:
    """The invented book with end notes, built and loaded into this test's database."""
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    (tmp_path / "books" / "ponts").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.setenv("BOOKRAG_SOURCES", str(tmp_path / "books"))
    monkeypatch.setenv("DATABASE_URL", pg_url)
    base = build(home, write_raw(home, book_text()), SLUG, capsys)
    assert main(["load", str(home / "corpus" / SLUG)]) == 0
    capsys.readouterr()
    return home, base


def chapter(home: Path, base: str, label: str) -> str:
    book = find_book(home / "corpus", SLUG)
    return next(f"{base}/{s.slug}/source.md" for s in book.front_matter if s.label == label)


def test_search_shows_the_call_and_the_note_names_its_caller(small, pg_url, capsys) -> None:
    home, base = small
    ch2 = chapter(home, base, "Chapitre II")
    with db.connect(pg_url) as conn:
        assert [r[0] for r in note_citations(conn, SLUG)] == [chapter(home, base, "Chapitre I"), ch2, ch2]
        assert conn.execute("SELECT rag.cites(%s, 0)", (chapter(home, base, "Chapitre I"),)).fetchone() == (
            [],
        )
        paragraph_3 = conn.execute(
            "SELECT chunk_index FROM rag.hierarchical_content_nodes WHERE source_file = %s AND paragraph = 3",
            (ch2,),
        ).fetchone()[0]
        cited = conn.execute(
            "SELECT DISTINCT source_file FROM rag.get_citations(%s, %s)", (ch2, paragraph_3)
        ).fetchall()
        assert cited == [(f"{base}/notes/note-b/source.md",)]
    assert (
        main(
            [
                "search",
                "péages",
                "--mode",
                "bm25",
                "--book",
                SLUG,
                "--levels",
                "0",
                "-k",
                "1",
                "--expand",
                "cited",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"      cites {base}/notes/note-b/source.md\n" in out
    assert f"      ↳ cited {base}/notes/note-b/source.md §1: " in out
    # a hit on the note says where it is called from, in its heading path and its citation
    assert main(["search", "pieux de chêne", "--mode", "bm25", "--book", SLUG, "-k", "1", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out.splitlines()[0])
    assert hit["source_file"] == f"{base}/notes/note-a/source.md"
    assert (
        hit["heading_path"].endswith("> Notes > Note A (Chapitre I, § 2)")
        and "Chapitre I, § 2" in hit["citation"]
    )


def test_a_call_without_its_note_stops_sidecars_with_the_line(small, capsys) -> None:
    home, base = small
    md = home / chapter(home, base, "Chapitre II")
    text = md.read_text(encoding="utf-8").replace("péages(_B_)", "péages(_E_)")
    md.write_text(text, encoding="utf-8")
    before = sidecar_path(md).read_bytes()
    line = next(k for k, ln in enumerate(text.split("\n"), start=1) if "(_E_)" in ln)
    assert main(["sidecars", str(md)]) == 1
    assert capsys.readouterr().err == (
        f"error: {md}:{line}: calls note (_E_), which the notes do not hold (the "
        "manifest's Notes part has no such section)\n"
    )
    assert sidecar_path(md).read_bytes() == before  # nothing written


@pytest.mark.parametrize(
    "cites, message",
    [
        (
            [{"source_file": "corpus/notes/notes/note-c/source.md"}],
            "cites corpus/notes/notes/note-c/source.md, but its text calls (_B_); run `bookrag sidecars {md}`",
        ),
        ([], None),
        (
            [{"source_file": "corpus/notes/notes/note-b/source.md", "paragraphs": [1]}],
            "cites on a source chunk must name whole end notes ({{source_file}} objects without paragraphs)",
        ),
    ],
)
def test_a_sidecar_whose_cites_disagree_with_the_calls_loads_nothing(
    small, pg_url, capsys, cites, message
) -> None:
    home, base = small
    md = chapter(home, base, "Chapitre II")
    sc = home / (md + ".jsonl")
    lines = sc.read_text(encoding="utf-8").splitlines()
    n = next(i for i, ln in enumerate(lines) if "(_B_)" in ln)
    obj = json.loads(lines[n])
    if cites:
        obj["cites"] = cites
    else:
        del obj["cites"]
        message = "cites nothing, but its text calls (_B_); run `bookrag sidecars {md}`"
    lines[n] = json.dumps(obj, ensure_ascii=False)
    sc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with db.connect(pg_url) as conn:
        before = conn.execute("SELECT count(*) FROM rag.citations").fetchone()
    assert main(["load", str(home / "corpus" / SLUG)]) == 1
    assert capsys.readouterr().err == f"error: {sc}:{n + 1}: {message.format(md=md)}\n"
    with db.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM rag.citations").fetchone() == before
