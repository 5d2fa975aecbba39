"""bookrag's MCP server: tools that call the SQL retrieval functions, as a read-only role.

Each tool is a plain typed function whose docstring is its description; arguments are validated
by their signature (Literal choices, Field bounds); results are pydantic models (models.py), so
clients get structured content and a published schema. Anything a model can fix (unknown book,
empty query, budget out of range, database briefly down) comes back as a tool error with a
message it can act on; the server keeps running.

The walls, in order: the `bookrag_mcp` role, a member of `bookrag_reader` (no CREATE or TEMP
anywhere, no side-effect functions, SELECT and EXECUTE on the corpus only, no other database,
connections of its own: decisions 13 and 30), per-connection limits set here (read-only
transactions, statement and lock timeouts), then for `read_only_sql` the SQL guard, the plan
bounds (sql_guard.plan_problem), a memory watchdog (watchdog.py), a server-side cursor (rows are
fetched as needed, cells capped in SQL), a deadline and at most two such calls at once so they
can never take the connections searches need.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, cast

import anyio
import anyio.to_thread
import psycopg
import psycopg.types.json
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from psycopg import sql as pgsql
from psycopg.rows import dict_row, tuple_row
from psycopg_pool import ConnectionPool, PoolTimeout
from pydantic import Field

from bookrag import db
from bookrag.cite import BookMeta, book_meta, paragraph_marks, part_label, scholarly
from bookrag.config import Settings
from bookrag.errors import BookragError, database_reason
from bookrag.links import DEFAULT_BASE, citation_url
from bookrag.quotes import Claim, check_answer, check_claims
from bookrag.search import (
    MAX_PHRASINGS,
    MODEL_REFUSED,
    MODES,
    SearchRequest,
    check_wordings,
    corpus_model,
    query_vectors,
    resolve_node,
    search_and_pack,
)
from mcp_server import watchdog
from mcp_server.models import (
    Book,
    Books,
    Children,
    Chunk,
    ChunkCitation,
    Cites,
    ContextChunk,
    Hit,
    LeftOut,
    Node,
    NodeChunk,
    Outline,
    OutlineEntry,
    QuoteCheck,
    QuoteChecks,
    QuoteIn,
    SearchResult,
    SqlResult,
)
from mcp_server.protocol import OneSentenceServer
from mcp_server.sql_guard import UnsafeSQL, builds_values, check_select, plan_problem

READ_ONLY = ToolAnnotations(
    read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False
)
MAX_CONTENT_CHARS = 4000  # one chunk's text (or one read_only_sql cell) is cut beyond this
MAX_SQL_CHARS = 100_000  # read_only_sql: rows beyond this many characters are dropped (truncated = true)
POOL_SIZE = 8
SQL_SLOTS = 2  # read_only_sql calls running at once; the other connections stay free for searches
SQL_TIMEOUT_S = 5  # statement_timeout of read_only_sql
SQL_DEADLINE_S = 6.0  # the call returns by then whatever the backend does (it is cancelled)
#: Per-connection limits and the schema path (they override whatever the role's own defaults
#: have become: a bookrag_mcp login may ALTER ROLE bookrag_mcp SET search_path, which would
#: otherwise hide the extensions' types and functions, in public, from every new connection).
CONNECTION_OPTIONS = (
    "-c default_transaction_read_only=on -c statement_timeout=10s -c lock_timeout=1s "
    "-c idle_in_transaction_session_timeout=30s -c work_mem=16MB -c search_path=public"
)


@dataclass
class AppState:
    pool: ConnectionPool
    sql_slots: threading.BoundedSemaphore
    #: The corpus embedding model, read once and kept: rag.search is told which model embedded
    #: the query and refuses another (a reload with a new model), and then it is read again.
    #: None until read, or while no vectors are loaded (read again on the next call).
    model: str | None = None
    #: Each book's author, title and year for scholarly citations (bookrag.cite), read once and
    #: again when a hit comes from a book not read yet.
    books: dict[str, BookMeta] | None = None
    reading_room_url: str = DEFAULT_BASE  # where the hits' citations link to (BOOKRAG_READING_ROOM_URL)

    def corpus_model(self) -> str | None:
        if self.model is None:
            found = with_connection(self, corpus_model)
            self.model = found[0] if found else None
        return self.model


@dataclass
class Running:
    """The one owner of the running server's AppState: created once (mcp_server.main.serve, or a
    test) and passed to build_server, whose lifespan fills it when the server starts and empties
    it when it stops, and to the reading room (mcp_server.http.http_app), which reads it; None
    until the server has started."""

    state: AppState | None = None


def reader_url(settings: Settings) -> str:
    """BOOKRAG_MCP_DATABASE_URL, else the corpus database logged in as bookrag_mcp (the reader's
    rights, connections of its own), with every transaction read-only and bounded in time."""
    url = settings.mcp_database_url or db.with_user(db.database_url(settings), db.MCP_ROLE)
    return psycopg.conninfo.make_conninfo(url, options=CONNECTION_OPTIONS)


def _configure(conn: psycopg.Connection) -> None:
    db.configure(conn)
    conn.autocommit = False


def _state(ctx: Context) -> AppState:
    return cast(AppState, ctx.request_context.lifespan_context)  # what lifespan() yields


def with_connection[T](state: AppState, fn: Callable[[psycopg.Connection], T]) -> T:
    """Run fn on a pooled connection, rolled back afterwards; every failure becomes one ToolError
    sentence an agent can act on."""
    try:
        with state.pool.connection() as conn:
            try:
                return fn(conn)
            finally:
                if not conn.closed:
                    conn.rollback()
    except BookragError as exc:
        raise ToolError(str(exc)) from exc
    except psycopg.errors.InvalidParameterValue as exc:
        raise ToolError(database_reason(exc)) from exc
    except psycopg.errors.QueryCanceled as exc:  # an OperationalError subclass: test it first
        raise ToolError("the statement ran past its time limit and was cancelled; narrow it") from exc
    except (
        psycopg.errors.ProgramLimitExceeded,
        psycopg.errors.OutOfMemory,
        psycopg.errors.ConfigurationLimitExceeded,
    ) as exc:
        raise ToolError(
            f"the answer is too large for the server ({database_reason(exc)}); aggregate less or add a LIMIT"
        ) from exc
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ToolError(f"not allowed: {database_reason(exc)}") from exc
    except psycopg.errors.StatementTooComplex as exc:  # e.g. "stack depth limit exceeded"
        raise ToolError(
            f"the statement is nested too deeply for the server ({database_reason(exc)}); nest it less"
        ) from exc
    except (PoolTimeout, psycopg.OperationalError) as exc:
        if isinstance(exc, psycopg.OperationalError) and not _unavailable(exc):
            raise ToolError(f"database error: {database_reason(exc)}") from exc
        if _never_loaded(state):
            raise ToolError(NO_BOOK) from exc
        raise ToolError(f"the database is unavailable ({type(exc).__name__}); try again in a moment") from exc
    except psycopg.Error as exc:
        raise ToolError(f"database error: {database_reason(exc)}") from exc


def _unavailable(exc: psycopg.OperationalError) -> bool:
    """Whether the database could not answer (the connection lost: no SQLSTATE; class 08, a
    connection exception; class 53, resources; 57P, a shutdown), rather than answered with a
    reason of its own, which the caller then gives word for word."""
    return exc.sqlstate is None or exc.sqlstate.startswith(("08", "53", "57P"))


#: What the tools answer when the server runs before any book was built and loaded.
NO_BOOK = "no book is loaded: run `bookrag demo` (or `bookrag build BOOK`) first, then ask again"


def _never_loaded(state: AppState) -> bool:
    """Whether a failed connection means "nothing was ever loaded here" rather than "the database
    is down": the server is reachable but its role or database does not exist yet (migrations
    create them, `bookrag demo` and `bookrag load` run the migrations)."""
    try:
        conninfo = state.pool.conninfo
        psycopg.connect(conninfo() if callable(conninfo) else conninfo, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        return "does not exist" in str(exc)
    return False


def _nothing_loaded(conn: psycopg.Connection) -> bool:
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT NOT EXISTS (SELECT 1 FROM rag.hierarchical_content_nodes)").fetchone()
    return bool(row and row[0])


def _add_citations(state: AppState, rows: list[dict[str, Any]]) -> None:
    """Each row gains which part of its paragraph it is and whether it is a note
    (bookrag.cite.paragraph_marks), its scholarly citation (bookrag.cite, the one rule) and its URL
    in the reading room (bookrag.links)."""
    if not rows:
        return
    if state.books is None or any(r["book"] not in state.books for r in rows):
        state.books = with_connection(state, book_meta)
    with_connection(state, lambda conn: paragraph_marks(conn, rows))
    for r in rows:
        r["scholarly"] = scholarly(
            state.books.get(r["book"]),
            r["heading_path"],
            r.get("paragraph"),
            r["node_type"],
            r.get("kind"),
            r.get("note"),
        )
        r["url"] = citation_url(state.reading_room_url, r["source_file"], r.get("paragraph"))


def _rows(conn: psycopg.Connection, query: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def _chunk(r: dict[str, Any]) -> dict[str, Any]:
    content = r["content"] or ""
    return {
        "citation": {
            "book": r["book"],
            "heading_path": r["heading_path"],
            "source_file": r["source_file"],
            "chunk_index": r["chunk_index"],
            "paragraph": r.get("paragraph"),
            "part": part_label(r),
            "note": r.get("note"),
            "scholarly": r.get("scholarly"),
            "url": r.get("url"),
        },
        "level": r["level"],
        "node_type": r["node_type"],
        "tokens": r["content_token_count"] or 0,
        "kind": r.get("kind"),
        "content": content if len(content) <= MAX_CONTENT_CHARS else content[:MAX_CONTENT_CHARS] + "…",
    }


def _node_chunk(r: dict[str, Any]) -> NodeChunk:
    """A node's chunk: its own citation (paragraph, part, note, scholarly); the node gives the rest once."""
    full = _chunk(r)
    c = full["citation"]
    return NodeChunk(
        citation=ChunkCitation(
            chunk_index=c["chunk_index"],
            paragraph=c["paragraph"],
            part=c["part"],
            note=c["note"],
            scholarly=c["scholarly"],
        ),
        content=full["content"],
        tokens=full["tokens"],
        cites=None,
        kind=full["kind"],
    )


def _node(state: AppState, rows: list[dict[str, Any]]) -> Node:
    first = rows[0]
    return Node(
        source_file=first["source_file"],
        book=first["book"],
        level=first["level"],
        node_type=first["node_type"],
        heading_path=first["heading_path"],
        parent_source_file=first["parent_source_file"],
        url=citation_url(state.reading_room_url, first["source_file"]),
        tokens=sum(r["content_token_count"] or 0 for r in rows),
        last_paragraph=first.get("last_paragraph"),
        chunks=[_node_chunk(r) for r in rows],
    )


def _no_node(source_file: str) -> ToolError:
    return ToolError(f"no node {source_file!r}; use a source_file from a search hit or the outline")


def _resolved(conn: psycopg.Connection, source_file: str) -> str:
    """The loaded node source_file names (a citation URL, a folder, a path without corpus/ too)."""
    found = resolve_node(conn, source_file)
    if found is None:
        raise _no_node(source_file)
    return found


#: A node's chunks (rag.get_node or rag.get_parent) from paragraph first to last (§N), with the node's
#: last paragraph and the book's paragraphs each chunk's anchors cite.
_WITH_CITES = (
    "SELECT x.*, rag.cites(x.source_file, x.chunk_index) AS cites FROM (SELECT g.*, max(g.paragraph) OVER () "
    "AS last_paragraph FROM rag.{}(%s) g) x WHERE x.paragraph IS NULL OR x.paragraph BETWEEN %s AND %s "
    "ORDER BY x.chunk_index"
)
EVERY = (1, 2**31 - 1)  # every paragraph


def _cited_node(state: AppState, rows: list[dict[str, Any]]) -> Node:
    _add_citations(state, rows)
    node = _node(state, rows)
    for chunk, row in zip(node.chunks, rows):
        chunk.cites = [Cites(**c) for c in row["cites"]] or None
    return node


# --- tools ---------------------------------------------------------------------------------

PHRASING = Annotated[str, Field(min_length=1, max_length=2000)]


def search_tool(
    ctx: Context,
    query: Annotated[
        str, Field(min_length=1, max_length=2000, description="the question, in the book's language")
    ],
    phrasings: Annotated[
        list[PHRASING],
        Field(
            max_length=MAX_PHRASINGS,
            description=(
                "up to 4 more wordings of the same question, searched with it and fused: (1) 6-12 keywords the author "
                "himself would use, in his period's vocabulary; (2) a 20-40-word passage written as the author might have "
                "written the answer, in his style and period. Not a modern paraphrase: it finds less"
            ),
        ),
    ] = [],  # noqa: B006 -- the tool's schema shows this default; pydantic copies it for each call
    k: Annotated[int, Field(ge=1, le=50, description="number of hits")] = 8,
    book: Annotated[str | None, Field(description="restrict to one book (see list_books)")] = None,
    within: Annotated[
        str | None,
        Field(
            max_length=500,
            description=(
                "a source_file: search only inside that node and below it. Once a first search has found the chapter (a "
                "paragraph hit's parent summary.md, or a summary hit's own), search again within it to pin the passage"
            ),
        ),
    ] = None,
    levels: Annotated[
        list[Annotated[int, Field(ge=0, le=3)]] | None,
        Field(
            min_length=1,
            description="0 paragraphs (the book's own words, to quote), 1 summaries of the sections holding them (a chapter, or a chapter's section when it has sections), 2 summaries of parts and of chapters that hold sections, 3 book summary; omitted: paragraphs first, summaries when no paragraph matches",
        ),
    ] = None,
    expand_parent: Annotated[
        bool,
        Field(
            description="attach each hit's parent node (a paragraph's section summary, a section summary's chapter or part summary)"
        ),
    ] = False,
    expand_cited: Annotated[
        bool,
        Field(
            description="attach to each summary hit the book's paragraphs its sentences cite (quote those, not the summary); to a paragraph hit, the author's end notes it calls"
        ),
    ] = False,
    token_budget: Annotated[
        int | None,
        Field(
            ge=50,
            le=20000,
            description="also build a reading-order context (hits + parents) within this many tokens",
        ),
    ] = None,
) -> SearchResult:
    """Search the loaded books; returns ranked passages, each with its citation. `citation.scholarly` is the citation
    to copy as is into an answer (author, title, part, chapter, § N); source_file and paragraph (§N) are for the
    reader who checks. A hit is one paragraph of a chapter's text: its source_file is the whole chapter's (or
    section's) source.md, its paragraph its §N there; a long paragraph comes in chunks that share the §N, and
    `citation.part` ("1/2", "2/2") says which one a hit is. kind "author_summary": the author's own summary of his
    section (his words); "note": a footnote; "editor_note": the editor's note, not the author's words;
    "extractive_summary": the author's sentences chosen and arranged by a program, not a summary anyone wrote:
    quote and cite the paragraphs it cites (`cites`, `expand_cited`), never it.

    Send the question with `phrasings` in the author's own language: the search matches words and a small
    embedding model that pairs modern wordings poorly with 19th-century prose, and the author's words find
    his paragraph. Example, for Bastiat:
      query: "Pourquoi Bastiat juge-t-il que la protection ne crée pas de travail ?"
      phrasings: ["régime protecteur travail national tarif déplacement consommateur spoliation",
                  "La protection ne crée point de travail ; elle le déplace. Ce que gagne l'industrie
                   protégée, le consommateur le perd, et la nation avec lui."]
    Each hit says which wordings found it (found_by: 0 = the query, i = phrasings[i-1]). To read around a hit §N,
    get_node with its source_file and paragraphs [N-3, N+3]; get_parent on its source_file gives the chapter's
    (or section's) summary.md; search again `within` that summary.md to pin the passage."""
    state = _state(ctx)
    try:
        query, wordings = check_wordings(query, phrasings)
    except BookragError as exc:
        raise ToolError(str(exc)) from exc

    req = SearchRequest(
        query,
        MODES[0],
        k,
        book,
        levels,
        expand_parent,
        token_budget,
        within,
        expand_cited=expand_cited,
        phrasings=wordings,
    )

    def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        # The query (and its phrasings, in one batch) is embedded before a connection is taken
        # (embeddings run in parallel, one per core, while searches hold the pool); then one
        # statement searches (and packs the context).
        model = state.corpus_model()
        try:
            vectors = query_vectors(model, [query, *wordings]) if model else None
        except BookragError as exc:  # e.g. a model this server cannot embed with: read it again next time
            state.model = None
            raise ToolError(str(exc)) from exc
        emb, more = (vectors[0], list(vectors[1:]) or None) if vectors is not None else (None, None)
        return with_connection(state, lambda conn: search_and_pack(conn, req, emb, model, min(k, 20), more))

    try:
        hits, context = run()
    except ToolError as exc:
        if not str(exc).startswith(MODEL_REFUSED):
            raise
        state.model = None  # the corpus was reloaded with another model: read it again, once
        hits, context = run()
    if not hits and with_connection(state, _nothing_loaded):
        raise ToolError(NO_BOOK)
    _add_citations(
        state, [*hits, *(context or []), *(r for h in hits for r in (h["parent"] or []) + (h["cited"] or []))]
    )
    out = SearchResult(
        query=query,
        phrasings=list(wordings),
        context=None,
        context_tokens=None,
        hits=[
            Hit(
                **_chunk(h),
                rank=h["rank"],
                score=h["score"],
                bm25_rank=h["bm25_rank"],
                vector_rank=h["vector_rank"],
                section_score=h["section_score"],
                sentence_rank=h["sentence_rank"],
                cites=h["cites"] or None,
                found_by=h.get("found_by"),
                phrasing_ranks=h.get("phrasing_ranks"),
                parent=[Chunk(**_chunk(p)) for p in h["parent"]] if expand_parent else None,
                cited=[Chunk(**_chunk(c)) for c in h["cited"]] if expand_cited else None,
            )
            for h in hits
        ],
    )
    if context is not None:
        out.context = [
            ContextChunk(**_chunk(r), role=r["role"], hit_rank=r["hit_rank"], used_tokens=r["used_tokens"])
            for r in context
        ]
        out.context_tokens = context[-1]["used_tokens"] if context else 0
    return out


def get_node(
    ctx: Context,
    source_file: Annotated[
        str,
        Field(
            min_length=1,
            max_length=500,
            description="a citation's source_file, e.g. corpus/<book>/.../summary.md",
        ),
    ],
    paragraphs: Annotated[
        list[int] | None,
        Field(
            min_length=2,
            max_length=2,
            description=(
                "only paragraphs first to last (§N, inclusive), e.g. [4, 10] to read around a hit's §7 in a long chapter; "
                "all of them when omitted"
            ),
        ),
    ] = None,
) -> Node:
    """A node's text (its chunks, in order: all of them, or the paragraphs asked for) and metadata, by source file; a summary's chunks list the book's paragraphs their anchors cite, a paragraph that calls an end note ("(_A_)") lists that note's source_file."""
    first, last = paragraphs or EVERY
    if not 1 <= first <= last:
        raise ToolError(
            f"paragraphs [{first}, {last}]: give [first, last] with 1 <= first <= last, e.g. [4, 10]"
        )

    def go(conn: psycopg.Connection) -> list[dict[str, Any]]:
        node = _resolved(conn, source_file)
        rows = _rows(conn, _WITH_CITES.format("get_node"), (node, first, last))
        if not rows:
            size = _rows(conn, "SELECT max(paragraph) AS n FROM rag.get_node(%s)", (node,))[0]["n"]
            raise ToolError(f"{node} has paragraphs §1–§{size}; paragraphs [{first}, {last}] is past them")
        return rows

    return _cited_node(_state(ctx), with_connection(_state(ctx), go))


def get_parent(
    ctx: Context,
    source_file: Annotated[
        str, Field(min_length=1, max_length=500, description="the node whose parent you want")
    ],
) -> Node:
    """The parent node (a paragraph's section summary; a section's chapter summary, when the chapter has sections; a chapter's part summary; a part's book summary); a summary's chunks list the book's paragraphs their anchors cite."""

    def go(conn: psycopg.Connection) -> tuple[str, list[dict[str, Any]]]:
        node = _resolved(conn, source_file)
        return node, _rows(conn, _WITH_CITES.format("get_parent"), (node, *EVERY))

    node, rows = with_connection(_state(ctx), go)
    if not rows:
        raise ToolError(f"{node} is the root of its book: it has no parent")
    return _cited_node(_state(ctx), rows)


def get_children(
    ctx: Context,
    source_file: Annotated[str, Field(min_length=1, max_length=500, description="the parent node")],
    token_budget: Annotated[
        int, Field(ge=0, le=50000, description="maximum tokens of children to return")
    ] = 4000,
) -> Children:
    """A node's children in document order (a part's chapters, a chapter's sections or its paragraphs), as many whole ones as fit in the token budget; says which were left out."""

    def go(conn: psycopg.Connection) -> tuple[str, list[dict[str, Any]]]:
        node = _resolved(conn, source_file)
        return node, _rows(conn, "SELECT * FROM rag.get_children(%s, %s)", (node, token_budget))

    node, rows = with_connection(_state(ctx), go)
    _add_citations(_state(ctx), [r for r in rows if r["role"] == "child"])
    included: dict[str, list[dict[str, Any]]] = {}
    left: list[LeftOut] = []
    for r in rows:
        if r["role"] == "child":
            included.setdefault(r["source_file"], []).append({**r, "parent_source_file": node})
        else:
            left.append(
                LeftOut(
                    source_file=r["source_file"],
                    heading_path=r["heading_path"],
                    tokens=r["content_token_count"],
                )
            )
    nodes = [_node(_state(ctx), rs) for rs in included.values()]
    used = max(
        (r["used_tokens"] for r in rows if r["role"] == "child"), default=0
    )  # rag.get_children's running total
    return Children(
        parent_source_file=node, token_budget=token_budget, used_tokens=used, included=nodes, left_out=left
    )


def outline(
    ctx: Context,
    book: Annotated[str, Field(min_length=1, max_length=200, description="a book from list_books")],
) -> Outline:
    """A book's table of contents: every node (book, parts, chapters, their sections, their texts) with level, depth in the tree, heading, size in tokens, and the paragraphs that are the author's own summaries."""
    rows = with_connection(_state(ctx), lambda conn: _rows(conn, "SELECT * FROM rag.outline(%s)", (book,)))
    return Outline(
        book=book,
        entries=[
            OutlineEntry(
                source_file=r["source_file"],
                parent_source_file=r["parent_source_file"],
                level=r["level"],
                node_type=r["node_type"],
                heading_path=r["heading_path"],
                chunks=r["chunk_count"],
                tokens=r["tokens"],
                embedded=r["embedded"],
                depth=r["depth"],
                author_summaries=r.get("author_summaries"),
            )
            for r in rows
        ],
    )


def list_books(ctx: Context) -> Books:
    """The books loaded, with author, year and size."""
    rows = with_connection(_state(ctx), lambda conn: _rows(conn, "SELECT * FROM rag.list_books()", ()))
    if not rows:
        raise ToolError(NO_BOOK)
    return Books(books=[Book(**r) for r in rows])


#: read_only_sql runs the checked statement through this wrapper: each row comes back as a JSON
#: array of its cells, every cell longer than MAX_CONTENT_CHARS cut in SQL, so no cell larger than
#: that ever leaves the database. json (not jsonb) keeps column order and duplicate names.
_CAPPED = pgsql.SQL(
    "SELECT (SELECT json_agg(CASE WHEN length(e.value::text) > {cap} THEN to_json(left(e.value::text, {cap}) || '…') "
    "ELSE e.value END ORDER BY e.o) FROM json_each(row_to_json(q)) WITH ORDINALITY AS e(key, value, o)) AS cells "
    "FROM (\n{statement}\n) AS q"
)


class MemoryCapExceeded(Exception):
    """The backend passed watchdog.MEMORY_CAP_BYTES and was cancelled."""


def _select(conn: psycopg.Connection, statement: str, max_rows: int, value_building: bool) -> SqlResult:
    timer = threading.Timer(SQL_DEADLINE_S, conn.cancel_safe)  # the backend stops even if the caller gave up
    timer.start()
    # watched from the plan on: planning folds constant expressions, which can build large values
    watch = watchdog.watch(conn)
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(
                pgsql.SQL("SET LOCAL statement_timeout = {}").format(pgsql.Literal(f"{SQL_TIMEOUT_S}s"))
            )
            # no parallel workers: their memory is not the backend's, and the plan's rows would be per worker
            conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            with conn.cursor(row_factory=tuple_row) as cur:  # the plan, without running the statement
                explained = cur.execute(
                    pgsql.SQL("EXPLAIN (FORMAT JSON) {}").format(pgsql.SQL(statement))
                ).fetchone()
            assert explained is not None  # EXPLAIN returns one row
            (plan,) = explained
            problem = plan_problem(plan[0]["Plan"], value_building)
            if problem:
                raise ToolError(f"rejected before running: {problem}")
            with conn.cursor() as cur:  # column names, without running the statement
                cur.execute(pgsql.SQL("SELECT * FROM (\n{}\n) AS q LIMIT 0").format(pgsql.SQL(statement)))
                columns = [d.name for d in cur.description or []]
            rows: list[list[Any]] = []
            size, truncated = 0, False
            # A server-side cursor: rows are produced and sent as they are fetched, never all at once.
            with conn.cursor(name="bookrag_read_only_sql", row_factory=tuple_row) as cur:
                cur.itersize = 50
                # the standard library's decoder here, not the pool's orjson (bookrag.db.configure):
                # an agent's SELECT can return integers beyond 64 bits, which orjson turns into floats
                psycopg.types.json.set_json_loads(json.loads, cur)
                cur.execute(
                    _CAPPED.format(cap=pgsql.Literal(MAX_CONTENT_CHARS), statement=pgsql.SQL(statement))
                )
                for (cells,) in cur:
                    if len(rows) == max_rows:
                        truncated = True
                        break
                    row = [
                        c if c is None or isinstance(c, (int, float, bool, str)) else str(c)
                        for c in cells or []
                    ]
                    size += sum(len(str(c)) for c in row)
                    if size > MAX_SQL_CHARS:  # keep the answer within what an agent's context can take
                        truncated = True
                        break
                    rows.append(row)
    except psycopg.Error:
        if watch is not None and watch.tripped:
            raise MemoryCapExceeded() from None
        raise
    finally:
        timer.cancel()
        if watch is not None:
            watch.stop()
    if (
        watch is not None and watch.tripped
    ):  # a cancel that came between two fetches: the backend is still large
        raise MemoryCapExceeded()
    return SqlResult(columns=columns, rows=rows, truncated=truncated)


def _select_or_close(
    conn: psycopg.Connection, statement: str, max_rows: int, value_building: bool
) -> SqlResult:
    try:
        return _select(conn, statement, max_rows, value_building)
    except RecursionError:  # the JSON decoder, on a cell nested deeper than Python's stack allows
        raise ToolError(
            "a value in the answer is nested too deeply to send back as JSON; select it as text (::text)"
        ) from None
    except MemoryCapExceeded:
        conn.close()  # the backend exits and gives its memory back; the pool opens a new one
        raise ToolError(
            f"the statement took over {watchdog.MEMORY_CAP_BYTES // 2**20} MB of server memory and was "
            "cancelled; aggregate fewer rows or shorter values, or add a WHERE"
        ) from None


async def read_only_sql(
    ctx: Context,
    sql: Annotated[
        str,
        Field(
            min_length=1,
            max_length=5000,
            description=(
                "one SELECT over rag.paragraphs (the text, one row per chunk, no vectors: book, source_file, heading_path, "
                "level, node_type, paragraph, chunk_index, part, parts, kind, note, content, tokens, parent_source_file, "
                "node_order), rag.books (book, title, author, year, volume, language, embedding_policy), "
                "rag.hierarchical_content_nodes (the same rows with their embedding: never SELECT *), "
                "rag.embedding_models, rag.function_versions"
            ),
        ),
    ],
    max_rows: Annotated[int, Field(ge=1, le=500, description="rows returned at most")] = 100,
) -> SqlResult:
    """Answer questions about the corpus itself (counts, sizes, which chapters, a paragraph's exact words…) with one read-only SELECT; 5 s limit, cells cut at 4,000 characters. Read the text from rag.paragraphs, e.g. SELECT paragraph, part, kind, content FROM rag.paragraphs WHERE source_file = '<a hit's source_file>' AND paragraph BETWEEN 4 AND 6 ORDER BY chunk_index."""
    state = _state(ctx)
    if not state.sql_slots.acquire(blocking=False):
        raise ToolError(
            f"read_only_sql is busy ({SQL_SLOTS} statements already running); try again in a moment"
        )

    def work() -> SqlResult:  # in a worker thread: the guard's parse is CPU work, kept off the event loop
        try:
            try:
                statement = check_select(unicodedata.normalize("NFC", sql))
            except UnsafeSQL as exc:
                raise ToolError(f"rejected: {exc}") from exc
            # the statement is run as a subquery: drop its final semicolon (and comments after it)
            statement = re.sub(r";\s*(?:--[^\n]*(?:\n\s*)?)*\Z", "", statement.rstrip())
            value_building = builds_values(statement)
            return with_connection(
                state, lambda conn: _select_or_close(conn, statement, max_rows, value_building)
            )
        finally:
            state.sql_slots.release()

    try:
        with anyio.fail_after(SQL_DEADLINE_S + 1):
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except TimeoutError as exc:
        raise ToolError(
            f"the statement ran past its {SQL_TIMEOUT_S} s limit and was cancelled; narrow it"
        ) from exc


def check_quotes(
    ctx: Context,
    quotes: Annotated[
        list[QuoteIn] | None,
        Field(
            description="the quotes to check (1 to 50), each with the place it cites; or give `answer` instead"
        ),
    ] = None,
    answer: Annotated[
        str | None,
        Field(
            max_length=100_000,
            description=(
                'an answer\'s whole text: its quotes (in « », “ ” or " ") are read with the citation after each '
                "(the scholarly string, source_file §N, or a reading-room url)"
            ),
        ),
    ] = None,
) -> QuoteChecks:
    """Check quotes word for word against the book, before you answer: for each, `exact` (the words are in the
    paragraph cited), `elsewhere` (verbatim in another paragraph: its citation is returned, cite that), `close`
    (nearly the paragraph's words: `book_words` and `differences` say what the book has), `summary` (the words
    of a summary, never the book: quote the paragraphs it cites) or `not found`. Case, apostrophes, quotation
    marks, punctuation, line breaks and italics do not count; every word does, accents included. Ellipses (…,
    [...]) stand for words left out. Give `quotes` (each with its source_file and paragraph) or your `answer`'s text."""
    if (quotes is None) == (answer is None):
        raise ToolError(
            "give either quotes (a list of {quote, source_file, paragraph}) or answer (your answer's text), not both"
        )
    state = _state(ctx)

    def go(conn: psycopg.Connection) -> list[Any]:
        if answer is not None:
            found = check_answer(conn, answer, state.reading_room_url)
            if not found:
                raise ToolError(
                    'the answer holds no quote to check (quotes are words between « », “ ” or " ", three words at least)'
                )
            return found
        claims = [Claim(q.quote, q.source_file, q.paragraph) for q in quotes or []]
        return check_claims(conn, claims, state.reading_room_url)

    results = [
        QuoteCheck(**{**c.as_dict(), "differences": c.differences or None})
        for c in with_connection(state, go)
    ]
    exact = sum(r.verdict == "exact" for r in results)
    return QuoteChecks(results=results, exact=exact, all_exact=exact == len(results))


# --- the server ----------------------------------------------------------------------------

INSTRUCTIONS = (
    "Search whole books (French economics and social science) and cite them. Start with list_books or "
    "search, sending the question with phrasings in the author's own words (his keywords, a short passage "
    "in his style); cite every claim with the hit's citation: its scholarly string copied as is (author, title, "
    "part, chapter, § N), with source_file and paragraph for the reader who checks. Use "
    "get_parent to read a hit's chapter summary, get_children to read a node's parts within a token budget. "
    "The prompt answer_from_the_books walks through it. Check your quotes (check_quotes) before you answer."
)


def answer_from_the_books(
    question: Annotated[str, Field(min_length=1, max_length=2000, description="the reader's question")],
    book: Annotated[
        str | None, Field(description="a book from list_books, if the question is about one")
    ] = None,
) -> str:
    """Walks an agent through answering a question from the books, citing the paragraphs it quotes."""
    where = f' (book: "{book}")' if book else ""
    return f"""Answer this question from the books served by this server{where}, citing the book for every claim:

{question}

1. Write the question in the author's own language before you search: 6-12 keywords he would use (his
   period's vocabulary, his own terms) and a 20-40-word passage as he might have written the answer, in his
   style. Call `search` with the question as `query` and those two as `phrasings`{f', book "{book}"' if book else ""}.
   A modern paraphrase is not a phrasing: it finds less.
2. Each paragraph hit is one paragraph of a chapter's text: its `source_file` is the whole chapter's (or
   section's) source.md and its `paragraph` the §N there; `citation.part` "1/2" marks the first of two chunks
   of one long paragraph (the same §N). `kind` "editor_note" is the editor's note, not the author's words;
   "note" is a footnote.
3. Read around the best hits: `get_node` with the hit's source_file and `paragraphs` (e.g. [4, 10] around
   §7) returns those paragraphs in order (a whole chapter is long). `get_parent` on the hit's source_file
   returns its summary (the chapter's or section's summary.md, the team's reading aid), whose chunks' `cites`
   name the paragraphs each condenses; to pin the passage, `search` again with `within` set to that
   summary.md (and new phrasings if the first ones missed).
4. Answer with the author's words: quote the paragraphs (level 0, `node_type` source), each with its
   `scholarly` citation copied as is (it ends with the § N; do not write your own form), never an
   editor's note as the author's. Summaries (level 1-3) are the team's reading aids, not the book: quote
   the paragraphs their anchors cite instead. Say so when the books do not answer the question.
5. Check your quotes (check_quotes) before you answer."""


def build_server(settings: Settings, url: str | None = None, running: Running | None = None) -> MCPServer:
    """A fresh server (tests build one each); `url` overrides the reader connection string;
    `running` receives its state while it runs (for the reading room)."""
    running = Running() if running is None else running

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[AppState]:
        pool = ConnectionPool(
            url or reader_url(settings),
            min_size=1,
            max_size=POOL_SIZE,
            configure=_configure,
            check=ConnectionPool.check_connection,
            open=False,
            timeout=5.0,
            kwargs={"row_factory": dict_row},
        )
        pool.open(wait=False)
        running.state = AppState(
            pool, threading.BoundedSemaphore(SQL_SLOTS), reading_room_url=settings.reading_room_url
        )
        try:
            yield running.state
        finally:
            running.state = None
            pool.close()

    server = OneSentenceServer("bookrag", instructions=INSTRUCTIONS, lifespan=lifespan)
    server.tool(name="search", annotations=READ_ONLY)(search_tool)
    for tool in (get_node, get_parent, get_children, outline, list_books, read_only_sql, check_quotes):
        server.tool(annotations=READ_ONLY)(tool)
    server.prompt(title="Answer from the books, citing them")(answer_from_the_books)
    return server
