"""The MCP server driven by the SDK's own client (ClientSession) over stdio and over HTTP,
against the fixture corpus in a real PostgreSQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager

import anyio
import psycopg
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from bookrag import db
from bookrag.links import DEFAULT_BASE, citation_url

C = "corpus/traite-des-echanges"
ROUTES = f"{C}/premiere-partie/chapitre-02-les-routes/source.md"
TOOLS = {
    "search",
    "get_node",
    "get_parent",
    "get_children",
    "outline",
    "list_books",
    "read_only_sql",
    "check_quotes",
}


def server_env(corpus_url: str, corpus_home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKRAG_")}
    env.update(DATABASE_URL=corpus_url, BOOKRAG_HOME=str(corpus_home))
    return env


@asynccontextmanager
async def stdio_session(corpus_url, corpus_home):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "bookrag.cli", "mcp"], env=server_env(corpus_url, corpus_home)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http(corpus_url, corpus_home, **env: str) -> tuple[subprocess.Popen, str]:
    """`bookrag mcp --http` on a free port, once it accepts connections: (process, http://host:port)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookrag.cli", "mcp", "--http", "--port", str(port)],
        env=server_env(corpus_url, corpus_home) | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120  # a loaded machine starts Python, the model and the pool slowly
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    crashed = proc.poll()
    stop_http(proc)
    pytest.fail(
        f"the HTTP MCP server exited with code {crashed}"
        if crashed is not None
        else "the HTTP MCP server took no connection in 120 s"
    )


def stop_http(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def http_server(corpus_url, corpus_home):
    proc, base = start_http(corpus_url, corpus_home)
    yield f"{base}/mcp"
    stop_http(proc)


@asynccontextmanager
async def http_session(url):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def exercise(session: ClientSession, room: str = DEFAULT_BASE) -> None:
    """Every tool once, with checks on the structured results and the error paths; `room` is the
    reading room citations link to (over HTTP, the server's own address)."""
    tools = await session.list_tools()
    assert {t.name for t in tools.tools} == TOOLS
    search_tool = next(t for t in tools.tools if t.name == "search")
    assert search_tool.annotations.read_only_hint is True and search_tool.output_schema is not None
    assert search_tool.input_schema["properties"]["k"]["maximum"] == 50
    # clients such as VS Code refuse a tool whose array parameter does not say what its items are
    untyped = [
        (t.name, name)
        for t in tools.tools
        for name, prop in t.input_schema["properties"].items()
        for s in [prop, *prop.get("anyOf", [])]
        if s.get("type") == "array" and "items" not in s
    ]
    assert (
        untyped == []
        and "paragraphs" in next(t for t in tools.tools if t.name == "get_node").input_schema["properties"]
    )

    r = await session.call_tool("list_books", {})
    assert not r.is_error
    assert [b["book"] for b in r.structured_content["books"]] == ["traite-des-echanges"]

    prompts = await session.list_prompts()
    assert [p.name for p in prompts.prompts] == ["answer_from_the_books"]
    walk = await session.get_prompt(
        "answer_from_the_books", {"question": "Qui paie les routes ?", "book": "traite-des-echanges"}
    )
    text = walk.messages[0].content.text
    assert "Qui paie les routes ?" in text and 'book "traite-des-echanges"' in text and "phrasings" in text

    # the default (auto) runs two-stage: the book's paragraphs, each with its chapter as parent
    r = await session.call_tool("search", {"query": "péage sur le pont", "k": 3, "expand_parent": True})
    assert not r.is_error and r.structured_content["phrasings"] == []
    hits = r.structured_content["hits"]
    assert len(hits) == 3 and {h["level"] for h in hits} == {0}
    assert ROUTES in {h["citation"]["source_file"] for h in hits}
    assert all(
        {p["citation"]["source_file"] for p in h["parent"]}
        == {h["citation"]["source_file"].replace("source.md", "summary.md")}
        for h in hits
    )

    # phrasings: the question in the author's words, searched with it and fused; each hit says
    # which wordings found it and at which rank
    r = await session.call_tool(
        "search",
        {
            "query": "Qui paie l'entretien des chemins ?",
            "k": 3,
            "expand_parent": True,
            "phrasings": [
                "péage pont routes entretien voyageurs",
                "Le péage du pont paie l'entretien de la route.",
            ],
        },
    )
    assert not r.is_error, r.content
    hits = r.structured_content["hits"]
    assert r.structured_content["phrasings"] == [
        "péage pont routes entretien voyageurs",
        "Le péage du pont paie l'entretien de la route.",
    ]
    assert len(hits) == 3 and [h["rank"] for h in hits] == [1, 2, 3]
    assert all(
        h["found_by"] and set(h["found_by"]) <= {0, 1, 2} and len(h["phrasing_ranks"]) == len(h["found_by"])
        for h in hits
    )
    top = next(h for h in hits if h["citation"]["source_file"] == ROUTES)
    assert (
        top["citation"]["heading_path"]
        == "Petit traité des échanges > Première partie > Chapitre II (Les routes)"
    )
    assert top["citation"]["scholarly"] == (
        "bookrag, *Petit traité des échanges* (2026), 1re partie, ch. II, "
        f"« Les routes », § {top['citation']['paragraph']}"
    )
    # the paragraph in the reading room (BOOKRAG_READING_ROOM_URL's default; over HTTP the server's own)
    assert top["citation"]["url"] == (
        f"{room}/books/traite-des-echanges/premiere-partie/chapitre-02-les-routes"
        f"?hl={top['citation']['paragraph']}#p{top['citation']['paragraph']}"
    )
    assert {p["citation"]["source_file"] for p in top["parent"]} == {
        ROUTES.replace("source.md", "summary.md")
    }
    assert search_tool.input_schema["properties"]["phrasings"]["maxItems"] == 4
    assert "keywords the author" in search_tool.input_schema["properties"]["phrasings"]["description"]

    r = await session.call_tool("search", {"query": "péage sur le pont", "k": 3, "token_budget": 200})
    assert not r.is_error and r.structured_content["context_tokens"] <= 200
    assert {c["role"] for c in r.structured_content["context"]} <= {"hit", "parent"}

    chapter = ROUTES.replace("source.md", "summary.md")
    r = await session.call_tool(
        "search", {"query": "le prix du pain", "k": 5, "within": chapter, "levels": [0, 1]}
    )
    assert not r.is_error
    assert {h["citation"]["source_file"] for h in r.structured_content["hits"]} <= {chapter, ROUTES}
    schema = search_tool.input_schema["properties"]
    assert "once a first search has found the chapter" in schema["within"]["description"].lower()
    # the tuning knobs are the SQL's and the CLI's, not an agent's
    assert not {
        "mode",
        "fusion",
        "normalisation",
        "bm25_weight",
        "vector_weight",
        "chapter_weight",
        "cite_weight",
        "sentence_after",
        "sentence_every",
    } & set(schema)

    r = await session.call_tool("get_node", {"source_file": ROUTES})
    assert not r.is_error and r.structured_content["level"] == 0 and len(r.structured_content["chunks"]) == 3
    assert all("cites" not in c for c in r.structured_content["chunks"])
    assert [c["citation"]["paragraph"] for c in r.structured_content["chunks"]] == [1, 2, 3]
    whole = r.structured_content
    assert whole["last_paragraph"] == 3
    r = await session.call_tool("get_node", {"source_file": ROUTES, "paragraphs": [2, 3]})  # around a hit
    part = r.structured_content
    assert [c["citation"]["paragraph"] for c in part["chunks"]] == [2, 3] and part["last_paragraph"] == 3
    assert part["tokens"] == sum(c["tokens"] for c in whole["chunks"][1:]) < whole["tokens"]
    r = await session.call_tool("get_node", {"source_file": ROUTES, "paragraphs": [3, 9]})
    assert [c["citation"]["paragraph"] for c in r.structured_content["chunks"]] == [3]
    r = await session.call_tool("get_node", {"source_file": ROUTES.replace("source.md", "summary.md")})
    assert [c["cites"] for c in r.structured_content["chunks"]] == [
        [{"source_file": ROUTES, "paragraphs": [1, 2]}]
    ]
    r = await session.call_tool("get_node", {"source_file": f"{C}/premiere-partie/summary.md"})
    assert r.structured_content["chunks"][1]["cites"] == [
        {"source_file": f"{C}/premiere-partie/chapitre-02-les-routes/summary.md", "paragraphs": None}
    ]

    r = await session.call_tool("get_parent", {"source_file": ROUTES})
    assert r.structured_content["source_file"] == ROUTES.replace("source.md", "summary.md")
    assert [c["cites"] for c in r.structured_content["chunks"]] == [
        [{"source_file": ROUTES, "paragraphs": [1, 2]}]
    ]
    # what agents paste for a node: a citation's URL (whole, or its path), a folder, a path without corpus/
    folder = ROUTES.removesuffix("/source.md")
    page = folder.removeprefix("corpus/")
    for name, meant in (
        (citation_url(DEFAULT_BASE, ROUTES, 2), ROUTES),
        (citation_url(DEFAULT_BASE, chapter, 1), chapter),
        (citation_url(DEFAULT_BASE, chapter), chapter),
        (f"{page}?hl=2#p2", ROUTES),
        (f"{ROUTES}#p2", ROUTES),
        (folder, chapter),
        (f"{folder}/", chapter),
        (ROUTES.removeprefix("corpus/"), ROUTES),
        (f"./{ROUTES}", ROUTES),
    ):
        r = await session.call_tool("get_node", {"source_file": name})
        assert not r.is_error and r.structured_content["source_file"] == meant, (name, r.content[0].text)
    r = await session.call_tool("get_parent", {"source_file": folder})
    assert r.structured_content["source_file"] == f"{C}/premiere-partie/summary.md"
    r = await session.call_tool("search", {"query": "le prix du pain", "k": 5, "within": folder})
    assert not r.is_error and r.structured_content["hits"]
    assert {h["citation"]["source_file"] for h in r.structured_content["hits"]} <= {chapter, ROUTES}

    r = await session.call_tool(
        "get_children", {"source_file": f"{C}/premiere-partie/summary.md", "token_budget": 60}
    )
    kids = r.structured_content
    assert [n["source_file"] for n in kids["included"]] == [
        f"{C}/premiere-partie/chapitre-01-le-boulanger/summary.md"
    ]
    assert [n["source_file"] for n in kids["left_out"]] == [
        f"{C}/premiere-partie/chapitre-02-les-routes/summary.md"
    ]
    assert kids["used_tokens"] <= 60
    assert kids["used_tokens"] == kids["included"][0]["tokens"] > 0
    assert kids["included"][0]["parent_source_file"] == f"{C}/premiere-partie/summary.md"
    left = await session.call_tool("get_node", {"source_file": kids["left_out"][0]["source_file"]})
    assert kids["left_out"][0]["tokens"] == left.structured_content["tokens"] > 0  # the whole child's size
    r = await session.call_tool("get_children", {"source_file": ROUTES.replace("source.md", "summary.md")})
    assert [c["citation"]["paragraph"] for n in r.structured_content["included"] for c in n["chunks"]] == [
        1,
        2,
        3,
    ]

    r = await session.call_tool("outline", {"book": "traite-des-echanges"})
    entries = r.structured_content["entries"]
    assert len(entries) == 13 and entries[0]["level"] == 3 and entries[0]["source_file"] == f"{C}/summary.md"
    assert [e["depth"] for e in entries[:4]] == [0, 1, 2, 1]  # book, front matter, its text, a part

    r = await session.call_tool(
        "read_only_sql",
        {
            "sql": "SELECT level, count(*) AS n FROM rag.hierarchical_content_nodes GROUP BY level ORDER BY level"
        },
    )
    assert r.structured_content["columns"] == ["level", "n"] and [
        row[0] for row in r.structured_content["rows"]
    ] == [0, 1, 2, 3]
    # cells decoded exactly (the pool decodes search JSON with orjson, which turns integers beyond 64 bits into floats)
    r = await session.call_tool(
        "read_only_sql", {"sql": "SELECT 18446744073709551617 AS big, 0.1 AS tenth, 'é' AS e"}
    )
    assert r.structured_content["rows"] == [[18446744073709551617, 0.1, "é"]]

    # Error paths: tool errors an agent can act on, and the server keeps serving.
    errors = {
        ("search", (("query", "   "),)): "the query is empty",
        (
            "search",
            (("query", "pain"), ("book", "nope")),
        ): 'unknown book "nope"; known books: traite-des-echanges',
        (
            "search",
            (("query", "pain"), ("phrasings", ("pain cher", "Pain cher "))),
        ): 'phrasing 2 repeats phrasing 1: "Pain cher "',
        ("search", (("query", "pain"), ("phrasings", ("PAIN",)))): 'phrasing 1 repeats the query: "PAIN"',
        ("search", (("query", "pain"), ("phrasings", ("  ",)))): "phrasing 1 is empty",
        (
            "search",
            (("query", "pain"), ("phrasings", ("a\x00b",))),
        ): "phrasing 1: the query contains a NUL character",
        (
            "search",
            (("query", "pain"), ("within", "corpus/x/summary.md")),
        ): 'within "corpus/x/summary.md" names no loaded node',
        ("get_node", (("source_file", "corpus/x/summary.md"),)): "no node 'corpus/x/summary.md'",
        (
            "get_node",
            (("source_file", ROUTES), ("paragraphs", (5, 9))),
        ): f"{ROUTES} has paragraphs §1–§3; paragraphs [5, 9] is past them",
        (
            "get_node",
            (("source_file", ROUTES), ("paragraphs", (3, 2))),
        ): "paragraphs [3, 2]: give [first, last] with 1 <= first <= last",
        (
            "get_node",
            (("source_file", ROUTES), ("paragraphs", (0, 2))),
        ): "paragraphs [0, 2]: give [first, last]",
        (
            "get_node",
            (("source_file", f"{C}/premiere-partie/chapitre-09"),),
        ): f"no node '{C}/premiere-partie/chapitre-09'",
        ("get_children", (("source_file", "x/y#p2"),)): "no node 'x/y#p2'",
        ("get_parent", (("source_file", ROUTES.replace("source", "sources")),)): "no node",
        ("get_parent", (("source_file", f"{C}/summary.md"),)): "is the root of its book: it has no parent",
        (
            "read_only_sql",
            (("sql", "DELETE FROM rag.books"),),
        ): "rejected: only SELECT is allowed, got DELETE",
        (
            "read_only_sql",
            (("sql", "SELECT 1; SELECT 2"),),
        ): "rejected: exactly one statement is allowed, got 2",
        ("read_only_sql", (("sql", "SELECT pg_sleep(30)"),)): "rejected: function pg_sleep() is not allowed",
    }
    for (tool, args), message in errors.items():
        r = await session.call_tool(tool, dict(args))
        assert r.is_error, (tool, args)
        assert message in r.content[0].text, r.content[0].text
    for bad in (
        {"query": "pain", "k": 0},
        {"query": "pain", "token_budget": 10**6},
        {"query": "pain", "phrasings": ["a", "b", "c", "d", "e"]},
        {"query": "pain", "phrasings": ["x" * 2001]},
    ):
        r = await session.call_tool("search", bad)
        assert r.is_error, bad
    r = await session.call_tool("search", {"query": '"l\'État" AND (x OR -y) : * & | ! \\', "k": 2})
    assert not r.is_error and len(r.structured_content["hits"]) == 2
    r = await session.call_tool("list_books", {})
    assert not r.is_error


def test_stdio(corpus_url, corpus_home):
    async def main():
        async with stdio_session(corpus_url, corpus_home) as session:
            await exercise(session)

    anyio.run(main)


def test_http(http_server):
    async def main():
        async with http_session(http_server) as session:
            await exercise(session, room=http_server.removesuffix("/mcp"))

    anyio.run(main)


def test_the_servers_role_cannot_write(corpus_url):
    """Even in a read-write session (the role's read-only default lifted), privileges refuse writes."""
    url = psycopg.conninfo.make_conninfo(
        db.with_user(corpus_url, db.READER_ROLE), options="-c default_transaction_read_only=off"
    )
    reader = db.connect(url, autocommit=True)
    for statement in (
        "INSERT INTO rag.books (book, title) VALUES ('x', 'x')",
        "DELETE FROM rag.hierarchical_content_nodes",
        "UPDATE rag.hierarchical_content_nodes SET content = ''",
        "SELECT rag._ensure_vector_index('x/y', 3)",
        "CREATE TABLE rag.t (a int)",
        "DROP FUNCTION rag.search",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute(statement)
    assert reader.execute("SELECT count(*) FROM rag.search('pain', NULL, 'bm25')").fetchone()[0] > 0
    reader.close()


def test_database_down_then_back(http_server, postgresql_proc):
    async def call():
        async with http_session(http_server) as session:
            return await session.call_tool("list_books", {})

    assert not anyio.run(call).is_error
    postgresql_proc.stop()
    try:
        r = anyio.run(call)
        assert r.is_error and "the database is unavailable" in r.content[0].text
    finally:
        postgresql_proc.start()
    deadline = time.monotonic() + 120  # the pool reconnects with a growing backoff
    while True:
        r = anyio.run(call)
        if not r.is_error or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not r.is_error, r.content[0].text  # recovered without a restart


def test_search_with_a_budget_is_one_search_packed_like_build_context(http_server, corpus_url):
    async def call():
        async with http_session(http_server) as session:
            return await session.call_tool(
                "search", {"query": "la monnaie et l'impôt", "k": 6, "token_budget": 500}
            )

    r = anyio.run(call)
    assert not r.is_error
    from bookrag.search import embed_query

    with psycopg.connect(corpus_url) as conn:
        db.register_vector(conn)
        v = embed_query(conn, "la monnaie et l'impôt")
        expected = conn.execute(
            "SELECT source_file, chunk_index, role, hit_rank, used_tokens "
            "FROM rag.build_context(%s, %s, 500, 6)",
            ("la monnaie et l'impôt", v),
        ).fetchall()
    got = [
        (
            c["citation"]["source_file"],
            c["citation"]["chunk_index"],
            c["role"],
            c["hit_rank"],
            c["used_tokens"],
        )
        for c in r.structured_content["context"]
    ]
    assert got == expected and r.structured_content["context_tokens"] == expected[-1][4]


def test_a_stale_corpus_model_is_read_again(pg_url, corpus_home):
    """The server keeps the corpus model. After a reload under another model, rag.search refuses
    the kept one, and the server reads the model again (here: a model it cannot embed with, named
    in the error); back on the local model, it answers again without a restart."""
    import threading
    from types import SimpleNamespace

    from mcp.server.mcpserver.exceptions import ToolError
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from loader.embedding import LOCAL_MODEL
    from loader.load import load
    from mcp_server.server import AppState, _configure, search_tool

    with db.connect(pg_url) as c:
        load(c, corpus_home, [corpus_home / "corpus" / "traite-des-echanges"])

    def rename(old: str, new: str) -> None:  # what a reload under another model leaves behind
        with psycopg.connect(pg_url, autocommit=True) as c, c.transaction():
            c.execute(
                "INSERT INTO rag.embedding_models (model, dimension, index_name) "
                "SELECT %s, dimension, index_name || '_x' FROM rag.embedding_models WHERE model = %s",
                (new, old),
            )
            c.execute(
                "UPDATE rag.hierarchical_content_nodes SET embedding_model = %s WHERE embedding_model = %s",
                (new, old),
            )
            c.execute("DELETE FROM rag.embedding_models WHERE model = %s", (old,))

    with ConnectionPool(
        pg_url, min_size=1, max_size=2, configure=_configure, kwargs={"row_factory": dict_row}
    ) as pool:
        state = AppState(pool, threading.BoundedSemaphore(1))
        ctx = SimpleNamespace(request_context=SimpleNamespace(lifespan_context=state))
        fresh = search_tool(ctx, query="le péage sur le pont", k=3)
        assert state.model == LOCAL_MODEL and fresh.hits[0].vector_rank is not None
        rename(LOCAL_MODEL, "other/model")
        with pytest.raises(ToolError, match="unknown dimension for model 'other/model'"):
            search_tool(ctx, query="le péage sur le pont", k=3)
        assert state.model is None  # a model it could not embed with is not kept
        rename("other/model", LOCAL_MODEL)
        again = search_tool(ctx, query="le péage sur le pont", k=3)
        assert state.model == LOCAL_MODEL
        assert [h.citation for h in again.hits] == [h.citation for h in fresh.hits]
