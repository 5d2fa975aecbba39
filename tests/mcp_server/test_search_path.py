"""The MCP server pins its connections' search_path: a bookrag_mcp login that sets its role's
path to pg_catalog (the role may) does not break hybrid search for every client (issue 43)."""

from __future__ import annotations

import anyio
import psycopg
from mcp import Client

from bookrag import db
from mcp_server.server import CONNECTION_OPTIONS, build_server
from tests.conftest import settings_for


def test_a_role_search_path_does_not_break_search(corpus_url, corpus_home):
    login = db.with_user(corpus_url, db.MCP_ROLE)
    with psycopg.connect(login, autocommit=True) as c:  # what any bookrag_mcp login may do
        c.execute("SET default_transaction_read_only = off")  # the role's default; its own to change
        c.execute("ALTER ROLE bookrag_mcp SET search_path = pg_catalog")
    try:
        with psycopg.connect(login) as c:  # a new connection of the role now has that path
            assert c.execute("SHOW search_path").fetchone()[0] == "pg_catalog"
        url = psycopg.conninfo.make_conninfo(login, options=CONNECTION_OPTIONS)
        server = build_server(settings_for(corpus_home, corpus_url), url=url)

        async def main():
            async with Client(server) as client:
                return await client.call_tool("search", {"query": "le péage sur le pont", "k": 3})

        r = anyio.run(main)
        assert not r.is_error, r.content
        hits = r.structured_content["hits"]
        assert hits and any(h["vector_rank"] is not None for h in hits)  # the vector branch ran
    finally:
        with psycopg.connect(corpus_url, autocommit=True) as c:
            c.execute("ALTER ROLE bookrag_mcp RESET search_path")
