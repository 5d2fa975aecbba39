"""bookrag's MCP server: tools that call the SQL retrieval functions, as a read-only role.

Each tool is a typed function whose docstring is its description; arguments are validated by
their signature (Literal choices, Field bounds); results are pydantic models, so clients get
structured content and a published schema. Anything a model can fix (unknown book, empty
query, budget out of range, database briefly down) comes back as a tool error with a message
it can act on; the server keeps running. One connection pool, created in the lifespan,
connects as `bookrag_reader` (created by the migrations: SELECT on the corpus, EXECUTE on
the functions, nothing else) in READ ONLY transactions.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import psycopg
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import BaseModel, Field

from bookrag import db
from bookrag.config import Settings
from bookrag.errors import BookragError
from bookrag.search import Fusion, Mode, Normalisation, SearchRequest, build_context, embed_query, search
from mcp_server.sql_guard import UnsafeSQL, check_select

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)
MAX_CONTENT_CHARS = 4000  # one chunk's text in a result is cut beyond this (chunks are ~400 tokens)
MAX_SQL_CHARS = 100_000  # read_only_sql: rows beyond this many characters are dropped (truncated = true)


def _cell(v: Any) -> Any:
    if v is None or isinstance(v, (int, float, bool)):
        return v
    text = v if isinstance(v, str) else str(v)
    return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS] + "…"


# --- result shapes -------------------------------------------------------------------------

class Citation(BaseModel):
    book: str
    heading_path: str
    source_file: str
    chunk_index: int


class Chunk(BaseModel):
    citation: Citation
    level: int
    node_type: str
    content: str
    tokens: int


class Hit(Chunk):
    rank: int
    score: float
    bm25_rank: int | None = None
    vector_rank: int | None = None
    section_score: float | None = None
    parent: list[Chunk] | None = Field(None, description="the parent node's rows, when expand_parent")


class ContextChunk(Chunk):
    role: Literal["hit", "parent"]
    hit_rank: int
    used_tokens: int


class SearchResult(BaseModel):
    query: str
    mode: str
    hits: list[Hit]
    context: list[ContextChunk] | None = Field(None, description="when token_budget is set: hits and parents within the budget, in reading order")
    context_tokens: int | None = None


class Node(BaseModel):
    source_file: str
    book: str
    level: int
    node_type: str
    heading_path: str
    parent_source_file: str | None
    tokens: int
    chunks: list[Chunk]


class LeftOut(BaseModel):
    source_file: str
    heading_path: str | None
    tokens: int


class Children(BaseModel):
    parent_source_file: str
    token_budget: int
    used_tokens: int
    included: list[Node]
    left_out: list[LeftOut] = Field(description="children not loaded because the budget was spent, in document order")


class OutlineEntry(BaseModel):
    source_file: str
    parent_source_file: str | None
    level: int
    node_type: str
    heading_path: str
    chunks: int
    tokens: int
    embedded: bool


class Outline(BaseModel):
    book: str
    entries: list[OutlineEntry]


class Book(BaseModel):
    book: str
    title: str
    author: str | None
    year: int | None
    embedding_policy: str
    nodes: int
    chunks: int
    tokens: int
    embedded_chunks: int
    levels: list[int]


class Books(BaseModel):
    books: list[Book]


class SqlResult(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(description="true when more rows existed than max_rows")


# --- state ---------------------------------------------------------------------------------

@dataclass
class AppState:
    pool: ConnectionPool
    embed_lock: threading.Lock  # the in-process embedder is not re-entrant


def reader_url(settings: Settings) -> str:
    """BOOKRAG_MCP_DATABASE_URL, else the corpus database logged in as bookrag_reader, with
    every transaction read-only."""
    url = os.environ.get("BOOKRAG_MCP_DATABASE_URL") or db.with_user(db.database_url(settings), db.READER_ROLE)
    return psycopg.conninfo.make_conninfo(url, options="-c default_transaction_read_only=on")


def _configure(conn: psycopg.Connection) -> None:
    db.register_vector(conn)
    conn.autocommit = False


def _chunk(r: dict[str, Any]) -> dict[str, Any]:
    content = r["content"] or ""
    return {
        "citation": {"book": r["book"] if r.get("book") else r["source_file"].split("/")[1],
                     "heading_path": r["heading_path"], "source_file": r["source_file"], "chunk_index": r["chunk_index"]},
        "level": r["level"], "node_type": r["node_type"], "tokens": r["content_token_count"] or 0,
        "content": content if len(content) <= MAX_CONTENT_CHARS else content[:MAX_CONTENT_CHARS] + "…",
    }


def build_server(settings: Settings, url: str | None = None) -> MCPServer:
    """A fresh server (tests build one each); `url` overrides the reader connection string."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[AppState]:
        pool = ConnectionPool(url or reader_url(settings), min_size=1, max_size=8, configure=_configure,
                              check=ConnectionPool.check_connection, open=False, timeout=5.0,
                              kwargs={"row_factory": dict_row})
        pool.open(wait=False)
        try:
            yield AppState(pool, threading.Lock())
        finally:
            pool.close()

    mcp = MCPServer("bookrag", instructions=(
        "Search whole books (French economics and social science) and cite them. Start with list_books or "
        "search; cite every claim with the hit's citation (heading_path, source_file, chunk_index). Use "
        "get_parent to read a hit's chapter summary, get_children to read a node's parts within a token budget."),
        lifespan=lifespan)

    def run(ctx: Context, fn):
        state: AppState = ctx.request_context.lifespan_context
        try:
            with state.pool.connection() as conn:
                return fn(conn, state)
        except BookragError as exc:
            raise ToolError(str(exc)) from exc
        except psycopg.errors.InvalidParameterValue as exc:
            raise ToolError(exc.diag.message_primary or str(exc)) from exc
        except psycopg.errors.QueryCanceled as exc:  # an OperationalError subclass: test it first
            raise ToolError("the statement ran past its time limit; narrow it") from exc
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise ToolError(f"the database is unavailable ({type(exc).__name__}); try again in a moment") from exc
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ToolError(f"not allowed: {exc.diag.message_primary}") from exc
        except psycopg.Error as exc:
            raise ToolError(f"database error: {exc.diag.message_primary or exc}") from exc

    @mcp.tool(name="search", annotations=READ_ONLY)
    def search_tool(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=2000, description="the question or keywords, in French for French books")],
        mode: Annotated[Mode, Field(description="hybrid = BM25 + vectors fused, chapter-aware (default); two-stage = best chapters first, then their paragraphs")] = "hybrid",
        k: Annotated[int, Field(ge=1, le=50, description="number of hits")] = 8,
        book: Annotated[str | None, Field(description="restrict to one book (see list_books)")] = None,
        levels: Annotated[list[Annotated[int, Field(ge=0, le=3)]] | None, Field(description="0 paragraphs, 1 chapter summaries, 2 part summaries, 3 book summary")] = None,
        expand_parent: Annotated[bool, Field(description="attach each hit's parent node (its chapter or part summary)")] = False,
        token_budget: Annotated[int | None, Field(ge=50, le=20000, description="also build a reading-order context (hits + parents) within this many tokens")] = None,
        within: Annotated[str | None, Field(max_length=500, description=(
            "a source_file: search only inside that node and below it. After a first search has found the right "
            "chapter (a hit's summary.md, or a paragraph hit's parent summary.md, or one from outline), search again "
            "with within set to it to pin the passage inside that chapter"))] = None,
        fusion: Annotated[Fusion | None, Field(description="how hybrid fuses BM25 and vectors: convex (normalised score combination) or rrf; default: the server's")] = None,
        normalisation: Annotated[Normalisation | None, Field(description="score normalisation of convex fusion; default: the server's")] = None,
        bm25_weight: Annotated[float | None, Field(description="weight of the BM25 branch; default: the server's")] = None,
        vector_weight: Annotated[float | None, Field(description="weight of the vector branch; default: the server's")] = None,
        chapter_weight: Annotated[float | None, Field(description="share of a paragraph's score taken from how well its chapter summary matches; default: the server's")] = None,
    ) -> SearchResult:
        """Search the loaded books and return ranked passages, each with its citation and its rank in the BM25 and vector branches. To read around a hit, search again with `within` = its chapter's summary.md."""
        if not query.strip():
            raise ToolError("the query is empty: give at least one word to search for")

        def go(conn: psycopg.Connection, state: AppState) -> SearchResult:
            with state.embed_lock:
                emb = embed_query(conn, query) if mode != "bm25" else None
            conn.rollback()
            req = SearchRequest(query, mode, k, book, levels, expand_parent, token_budget, within,
                                fusion, normalisation, bm25_weight, vector_weight, chapter_weight)
            hits = search(conn, req, emb)
            out = SearchResult(query=query, mode=mode, hits=[
                Hit(**_chunk(h), rank=h["rank"], score=h["score"], bm25_rank=h["bm25_rank"], vector_rank=h["vector_rank"],
                    section_score=h["section_score"],
                    parent=[Chunk(**_chunk(p)) for p in h["parent"]] if expand_parent else None)
                for h in hits])
            if token_budget:
                rows = build_context(conn, replace(req, k=min(k, 20), expand_parent=True), emb)
                out.context = [ContextChunk(**_chunk(r), role=r["role"], hit_rank=r["hit_rank"], used_tokens=r["used_tokens"]) for r in rows]
                out.context_tokens = rows[-1]["used_tokens"] if rows else 0
            return out

        return run(ctx, go)

    def require_node(conn: psycopg.Connection, source_file: str) -> None:
        exists = conn.execute("SELECT 1 FROM rag.hierarchical_content_nodes WHERE source_file = %s LIMIT 1",
                              (source_file,)).fetchone()
        conn.rollback()
        if not exists:
            raise ToolError(f"no node {source_file!r}; use a source_file from a search hit or the outline")

    def node_of(rows: list[dict[str, Any]]) -> Node:
        first = rows[0]
        return Node(source_file=first["source_file"], book=first["book"], level=first["level"], node_type=first["node_type"],
                    heading_path=first["heading_path"], parent_source_file=first["parent_source_file"],
                    tokens=sum(r["content_token_count"] or 0 for r in rows), chunks=[Chunk(**_chunk(r)) for r in rows])

    @mcp.tool(annotations=READ_ONLY)
    def get_node(
        ctx: Context,
        source_file: Annotated[str, Field(min_length=1, max_length=500, description="a citation's source_file, e.g. corpus/<book>/.../summary.md")],
    ) -> Node:
        """A node's full text (all its chunks, in order) and metadata, by source file."""
        def go(conn: psycopg.Connection, _state: AppState) -> Node:
            rows = conn.execute("SELECT * FROM rag.get_node(%s)", (source_file,)).fetchall()
            conn.rollback()
            if not rows:
                raise ToolError(f"no node {source_file!r}; use a source_file from a search hit or the outline")
            return node_of(rows)
        return run(ctx, go)

    @mcp.tool(annotations=READ_ONLY)
    def get_parent(
        ctx: Context,
        source_file: Annotated[str, Field(min_length=1, max_length=500, description="the node whose parent you want")],
    ) -> Node:
        """The parent node (a paragraph's chapter summary, a chapter's part summary, a part's book summary)."""
        def go(conn: psycopg.Connection, _state: AppState) -> Node:
            require_node(conn, source_file)
            rows = conn.execute("SELECT * FROM rag.get_parent(%s)", (source_file,)).fetchall()
            conn.rollback()
            if not rows:
                raise ToolError(f"{source_file} is the root of its book: it has no parent")
            return node_of(rows)
        return run(ctx, go)

    @mcp.tool(annotations=READ_ONLY)
    def get_children(
        ctx: Context,
        source_file: Annotated[str, Field(min_length=1, max_length=500, description="the parent node")],
        token_budget: Annotated[int, Field(ge=0, le=50000, description="maximum tokens of children to return")] = 4000,
    ) -> Children:
        """A node's children in document order, as many whole ones as fit in the token budget; says which were left out."""
        def go(conn: psycopg.Connection, _state: AppState) -> Children:
            require_node(conn, source_file)
            rows = conn.execute("SELECT * FROM rag.get_children(%s, %s)", (source_file, token_budget)).fetchall()
            conn.rollback()
            included: dict[str, list[dict[str, Any]]] = {}
            left: list[LeftOut] = []
            for r in rows:
                if r["included"]:
                    included.setdefault(r["source_file"], []).append(r)
                else:
                    left.append(LeftOut(source_file=r["source_file"], heading_path=r["heading_path"], tokens=r["node_tokens"]))
            nodes = [node_of(rs) for rs in included.values()]
            return Children(parent_source_file=source_file, token_budget=token_budget,
                            used_tokens=sum(n.tokens for n in nodes), included=nodes, left_out=left)
        return run(ctx, go)

    @mcp.tool(annotations=READ_ONLY)
    def outline(
        ctx: Context,
        book: Annotated[str, Field(min_length=1, max_length=200, description="a book from list_books")],
    ) -> Outline:
        """A book's table of contents: every node (book, parts, chapters, their texts) with level, heading, size in tokens."""
        def go(conn: psycopg.Connection, _state: AppState) -> Outline:
            rows = conn.execute("SELECT * FROM rag.outline(%s)", (book,)).fetchall()
            conn.rollback()
            return Outline(book=book, entries=[OutlineEntry(source_file=r["source_file"], parent_source_file=r["parent_source_file"],
                                                            level=r["level"], node_type=r["node_type"], heading_path=r["heading_path"],
                                                            chunks=r["chunk_count"], tokens=r["tokens"], embedded=r["embedded"]) for r in rows])
        return run(ctx, go)

    @mcp.tool(annotations=READ_ONLY)
    def list_books(ctx: Context) -> Books:
        """The books loaded, with author, year and size."""
        def go(conn: psycopg.Connection, _state: AppState) -> Books:
            rows = conn.execute("SELECT * FROM rag.list_books()").fetchall()
            conn.rollback()
            return Books(books=[Book(**r) for r in rows])
        return run(ctx, go)

    @mcp.tool(annotations=READ_ONLY)
    def read_only_sql(
        ctx: Context,
        sql: Annotated[str, Field(min_length=1, max_length=5000, description="one SELECT over rag.hierarchical_content_nodes, rag.books, rag.embedding_models, rag.function_versions")],
        max_rows: Annotated[int, Field(ge=1, le=500, description="rows returned at most")] = 100,
    ) -> SqlResult:
        """Answer questions about the corpus itself (counts, sizes, which chapters…) with one read-only SELECT; 5 s limit."""
        try:
            check_select(sql)
        except UnsafeSQL as exc:
            raise ToolError(f"rejected: {exc}") from exc

        def go(conn: psycopg.Connection, _state: AppState) -> SqlResult:
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION READ ONLY")
                    conn.execute("SET LOCAL statement_timeout = '5s'")
                    with conn.cursor() as cur:
                        cur.execute(sql)
                        cols = [d.name for d in cur.description or []]
                        rows = cur.fetchmany(max_rows + 1)
            finally:
                conn.rollback()
            data = [[_cell(v) for v in row.values()] for row in rows[:max_rows]]
            truncated = len(rows) > max_rows
            while data and sum(len(str(v)) for row in data for v in row) > MAX_SQL_CHARS:
                data.pop()  # keep the answer within what an agent's context can take
                truncated = True
            return SqlResult(columns=cols, rows=data, truncated=truncated)

        return run(ctx, go)

    return mcp


def run(settings: Settings, http: bool = False, host: str = "127.0.0.1", port: int = 8765) -> None:
    # One OpenMP thread for the query embedder: on a small machine the database needs the other
    # core, and two embedding threads fighting PostgreSQL turned a 10 ms embedding into 1.7 s
    # (bench/bench_mcp.py: sequential p95 1,737 ms with the default, 55 ms with one thread).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    server = build_server(settings)
    if http:
        server.run("streamable-http", host=host, port=port, streamable_http_path="/mcp")
    else:
        server.run("stdio")
