"""The MCP tools on books as they are (issue 36): a paragraph's end-note cites and a note's caller
(decision 36), the author's own summaries (decision 35), on the invented books the loader tests
build."""

from __future__ import annotations

import re
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import settings_for
from tests.loader.test_author_summaries import SLUG, built  # noqa: F401  (fixture)
from tests.loader.test_endnote_citations import small  # noqa: F401  (fixture)
from tests.mcp_server.test_reading_room import client_for


def test_the_author_summaries_through_mcp(built, pg_url) -> None:  # noqa: F811
    home, chapter = built

    async def through_mcp() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "bookrag.cli", "mcp"],
            env={"DATABASE_URL": pg_url, "BOOKRAG_HOME": str(home), "PATH": "/usr/bin:/bin"},
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("search", {"query": "culées poussée forme", "k": 3, "levels": [0]})
            assert not r.is_error, r.content
            hit = next(h for h in r.structured_content["hits"] if h["citation"]["paragraph"] == 6)
            assert hit["kind"] == "author_summary"
            r = await session.call_tool("get_node", {"source_file": f"{chapter}/source.md"})
            assert [c["kind"] for c in r.structured_content["chunks"]][:2] == ["author_summary", "text"]
            r = await session.call_tool("outline", {"book": SLUG})
            entry = next(
                e for e in r.structured_content["entries"] if e["source_file"] == f"{chapter}/source.md"
            )
            assert entry["author_summaries"] == [1, 6]

    anyio.run(through_mcp)


def test_the_mcp_tools_show_the_call_and_the_caller(small, pg_url) -> None:  # noqa: F811
    home, base = small

    async def go() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "bookrag.cli", "mcp"],
            env={"DATABASE_URL": pg_url, "BOOKRAG_HOME": str(home), "PATH": "/usr/bin:/bin"},
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool(
                "search", {"query": "péages", "k": 2, "levels": [0], "expand_cited": True}
            )
            assert not r.is_error, r.content
            hit = next(h for h in r.structured_content["hits"] if "(_B_)" in h["content"])
            assert hit["cites"] == [{"source_file": f"{base}/notes/note-b/source.md", "paragraphs": None}]
            assert {c["citation"]["source_file"] for c in hit["cited"]} == {f"{base}/notes/note-b/source.md"}
            r = await session.call_tool("search", {"query": "pieux de chêne", "k": 1})
            citation = r.structured_content["hits"][0]["citation"]
            assert citation["source_file"] == f"{base}/notes/note-a/source.md"
            assert (
                citation["heading_path"].endswith("Note A (Chapitre I, § 2)")
                and "Chapitre I, § 2" in citation["scholarly"]
            )

    anyio.run(go)


def test_the_reading_room_marks_the_authors_summaries(built, pg_url) -> None:  # noqa: F811
    home, chapter = built
    marker = "the author's own summary of the section"
    with client_for(settings_for(home, pg_url)) as room:
        page = room.get("/books/" + chapter.removeprefix("corpus/")).text
        marked = re.findall(
            r'<p id="p(\d+)" class="para[^"]*"><a class="num"[^>]*>§\d+</a> <span class="author-summary"',
            page,
        )
        assert marked == ["1", "6"] and page.count(marker) == 2
        hits = room.get("/search", params={"q": "culées poussée forme", "book": SLUG}).text
        assert marker + " (his outline of what follows)" in hits
