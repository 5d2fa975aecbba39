"""rag.check_quotes (issue 45): quotes checked word for word against the paragraphs they cite,
on the fixture corpus (the team's own text), as the reader role the MCP server logs in as."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from bookrag import db

C = "corpus/traite-des-echanges/premiere-partie"
BAKER = f"{C}/chapitre-01-le-boulanger/source.md"
BAKER_SUMMARY = f"{C}/chapitre-01-le-boulanger/summary.md"
ROADS = f"{C}/chapitre-02-les-routes/source.md"


@pytest.fixture(scope="module")
def reader(corpus_url: str):
    """The fixture corpus as bookrag_mcp, read-only: what the MCP server's calls run as."""
    c = psycopg.connect(db.with_user(corpus_url, db.MCP_ROLE), row_factory=dict_row)
    c.execute("SET default_transaction_read_only = on")
    yield c
    c.close()


def check(conn: psycopg.Connection, *quotes: Any) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT * FROM rag.check_quotes(%s::jsonb)", (json.dumps(list(quotes)),)).fetchall()
    conn.rollback()
    return rows


def one(conn: psycopg.Connection, quote: str, source_file: str | None = None, paragraph: int | None = None):
    (row,) = check(conn, {"quote": quote, "source_file": source_file, "paragraph": paragraph})
    return row


@pytest.mark.parametrize(
    "quote",
    [
        "Avant l'aube, le boulanger pétrit la pâte et allume son four de briques.",
        "Avant l’aube, le boulanger pétrit la pâte",  # typographic apostrophe
        "«Avant l'aube, le boulanger\npétrit   la pâte»",  # guillemets, line break, spacing
        "AVANT L'AUBE, le _boulanger_ pétrit la *pâte*",  # case, italics markers
        "Avant l'aube, le boulanger pétrit la pâte et allume son four de briques.",
        "Avant l'aube […] allume son four",  # an ellipsis: pieces in order
        "Avant l'aube... allume son four [...] les planches de la boutique",
        "Avant l'aube, le boulanger pe\u0301trit la pâte",  # a combining accent
    ],
)
def test_true_quotes_in_any_typography_are_exact(reader, quote):
    row = one(reader, quote, BAKER, 1)
    assert (row["verdict"], row["source_file"], row["paragraph"]) == ("exact", BAKER, 1), row


def test_oe_and_its_ligature_are_one_word(reader):
    assert (
        reader.execute("SELECT rag._quote_words('L''Œuvre, les œufs') AS w").fetchone()["w"]
        == "l oeuvre les oeufs"
    )
    reader.rollback()


def test_a_quote_across_two_paragraphs_is_exact_and_says_so(reader):
    row = one(reader, "les planches de la boutique. Autrefois chaque famille cuisait elle-même", BAKER, 1)
    assert (row["verdict"], row["paragraph"], row["paragraph_last"]) == ("exact", 1, 2)
    assert "two paragraphs, §1–§2" in row["note"]


def test_the_right_words_at_the_wrong_paragraph_are_elsewhere_with_the_right_one(reader):
    quote = "Le conseil du village a voulu installer un péage sur le pont"
    for source_file, paragraph in ((ROADS, 3), (BAKER, 2), (None, None)):
        row = one(reader, quote, source_file, paragraph)
        assert (row["verdict"], row["source_file"], row["paragraph"]) == ("elsewhere", ROADS, 2), row
        assert (row["cited_source_file"], row["cited_paragraph"]) == (source_file, paragraph)
        assert row["book"] == "traite-des-echanges" and "Chapitre II" in row["heading_path"]


@pytest.mark.parametrize(
    ("quote", "difference"),
    [
        ("le boulanger pétrit la farine et allume son four", "« farine » where the book has « pâte »"),
        ("le boulanger pétrit la et allume son four", "the book has « pâte » here"),
        ("le boulanger pétrit la pâte allume et son four", "« allume et » in the other order"),
        ("le boulanger pétrit la bonne pâte et allume son four", "« bonne » is not in the book"),
        ("le boulanger petrit la pâte et allume son four", "« petrit » where the book has « pétrit »"),
    ],
)
def test_one_word_changed_dropped_swapped_or_added_is_close_with_the_books_words(reader, quote, difference):
    row = one(reader, quote, BAKER, 1)
    assert (row["verdict"], row["source_file"], row["paragraph"]) == ("close", BAKER, 1), row
    assert row["book_words"] == "le boulanger pétrit la pâte et allume son four"
    assert any(d.startswith(difference) for d in row["differences"]), row["differences"]


def test_a_summarys_words_are_never_exact_for_the_book(reader):
    row = one(reader, "la division du travail enrichit le village", BAKER, 2)
    assert (row["verdict"], row["source_file"]) == ("summary", BAKER_SUMMARY), row
    assert "summary" in row["note"] and row["level"] == 1


def test_words_not_in_the_book_are_not_found(reader):
    row = one(reader, "les poules du village pondent des œufs en or chaque matin", BAKER, 1)
    assert row["verdict"] == "not found" and row["source_file"] is None
    row = one(reader, "allume son four […] Avant l'aube", BAKER, 1)  # the pieces out of order
    assert row["verdict"] == "not found" and "in that order" in row["note"]


def test_a_citation_that_names_nothing_loaded_is_checked_as_uncited_and_says_so(reader):
    quote = "Le conseil du village a voulu installer un péage"
    row = one(reader, quote, f"{C}/chapitre-09-nulle-part/source.md", 2)
    assert (row["verdict"], row["paragraph"]) == ("elsewhere", 2)
    assert (
        "no file corpus/traite-des-echanges/premiere-partie/chapitre-09-nulle-part/source.md is loaded"
        in row["note"]
    )
    row = one(reader, quote, ROADS, 99)
    assert (row["verdict"], row["paragraph"]) == ("elsewhere", 2)
    assert row["note"].startswith(f"{ROADS} has paragraphs §1–§3: there is no §99")


def test_a_batch_keeps_its_order(reader):
    rows = check(
        reader,
        {"quote": "Avant l'aube, le boulanger pétrit la pâte", "source_file": BAKER, "paragraph": 1},
        "Une route droite et bien entretenue vaut donc une bonne récolte",
        {"quote": "les poules pondent des œufs en or", "book": "traite-des-echanges"},
    )
    assert [(r["ord"], r["verdict"]) for r in rows] == [(1, "exact"), (2, "elsewhere"), (3, "not found")]
    assert rows[1]["source_file"] == ROADS and rows[1]["paragraph"] == 3


@pytest.mark.parametrize(
    ("quotes", "message"),
    [
        ('{"quote": "x"}', 'quotes must be a JSON array of {"quote", "source_file", "paragraph"} objects'),
        ("[]", "no quote to check: give at least one"),
        (json.dumps(["un mot"] * 51), "51 quotes in one call; the limit is 50: check them in several calls"),
        (json.dumps(["a" * 2001]), "quote 1 is 2001 characters long; the limit is 2000"),
        (json.dumps(["bien", " « … » "]), "quote 2 is empty (no word to check)"),
        (
            json.dumps(["le boulanger\u0007 pétrit"]),
            "quote 1 holds a control character (U+0007) at character 13; remove it",
        ),
        (
            json.dumps([{"quote": "le four", "paragraph": "deux"}]),
            "quote 1: paragraph must be a whole number",
        ),
        (json.dumps([{"quote": "le four", "page": 3}]), 'quote 1: unknown field "page"'),
        (json.dumps([{"text": "le four"}]), 'quote 1: give an object with a "quote" string'),
    ],
)
def test_bad_input_is_one_sentence(reader, quotes, message):
    with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        reader.execute("SELECT * FROM rag.check_quotes(%s::jsonb)", (quotes,))
    reader.rollback()
    assert message in str(err.value)
    assert reader.execute("SELECT count(*) AS n FROM rag.check_quotes('[\"le four\"]')").fetchone()["n"] == 1
    reader.rollback()


def test_check_quotes_is_stable_and_the_reader_may_call_it(reader):
    row = reader.execute(
        "SELECT p.provolatile, has_function_privilege('bookrag_reader', p.oid, 'EXECUTE') AS reader, "
        "has_function_privilege('public', p.oid, 'EXECUTE') AS public "
        "FROM pg_proc p WHERE p.oid = 'rag.check_quotes(jsonb)'::regprocedure"
    ).fetchone()
    reader.rollback()
    assert row == {"provolatile": "s", "reader": True, "public": False}
