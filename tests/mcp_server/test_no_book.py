"""A server started before any book is loaded says so, and says what to run, instead of "the
database is unavailable… try again"."""

from __future__ import annotations

import anyio
import psycopg
from mcp import Client

from bookrag import db
from mcp_server.server import CONNECTION_OPTIONS, NO_BOOK, build_server
from tests.conftest import settings_for

EXPECTED = "no book is loaded: run `bookrag demo` (or `bookrag build BOOK`) first, then ask again"


def answers(server, calls: list[tuple[str, dict]]) -> list[tuple[bool, str]]:
    async def main() -> list[tuple[bool, str]]:
        async with Client(server) as client:
            out = []
            for name, arguments in calls:
                r = await client.call_tool(name, arguments)
                text = r.content[0].text if r.content else ""
                out.append((r.is_error, text.split(f"Error executing tool {name}: ", 1)[-1]))
            return out

    return anyio.run(main)


def test_a_migrated_empty_database(pg_url, tmp_path):
    """Migrated, nothing loaded: list_books and search answer the sentence."""
    reader = psycopg.conninfo.make_conninfo(db.with_user(pg_url, db.READER_ROLE), options=CONNECTION_OPTIONS)
    server = build_server(settings_for(tmp_path, pg_url), url=reader)
    got = answers(
        server,
        [
            ("list_books", {}),
            ("search", {"query": "la pétition des fabricants de chandelles"}),
            ("search", {"query": "chandelles", "mode": "bm25"}),
        ],
    )
    assert NO_BOOK == EXPECTED
    assert got == [(True, EXPECTED)] * 3


def test_a_database_that_was_never_created(pg_url, tmp_path):
    """The server is up but bookrag's database is not there yet (never migrated): the same sentence."""
    missing = psycopg.conninfo.make_conninfo(
        db.with_user(pg_url, db.READER_ROLE), dbname="bookrag_never_built", options=CONNECTION_OPTIONS
    )
    server = build_server(settings_for(tmp_path, pg_url), url=missing)
    assert answers(server, [("list_books", {})]) == [(True, EXPECTED)]


def test_a_loaded_corpus_is_not_affected(corpus_url, corpus_home):
    reader = psycopg.conninfo.make_conninfo(
        db.with_user(corpus_url, db.READER_ROLE), options=CONNECTION_OPTIONS
    )
    server = build_server(settings_for(corpus_home, corpus_url), url=reader)
    [(list_error, _), (search_error, text)] = answers(
        server, [("list_books", {}), ("search", {"query": "zzzqqq", "mode": "bm25"})]
    )
    assert not list_error and not search_error and "no book" not in text
