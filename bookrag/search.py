"""Python's side of retrieval: embed the query with the corpus model, call one SQL function.

Nothing here ranks, fuses or expands: rag.search_* and rag.build_context do. Used by the CLI
(`bookrag search`, `bookrag embed`) and the MCP server."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg.rows import dict_row, tuple_row

from bookrag.errors import BookragError

#: The names rag.search accepts (the SQL checks them; this tuple feeds the CLI's choices and the
#: MCP schema). Fusion names and bounds are rag._fusion_settings's; defaults rag._fusion_settings's.
MODES = ("hybrid", "bm25", "vector", "two-stage")
FUSIONS = ("convex", "rrf")
NORMALISATIONS = ("minmax", "zscore")
Mode = Literal[MODES]  # type: ignore[valid-type]
Fusion = Literal[FUSIONS]  # type: ignore[valid-type]
Normalisation = Literal[NORMALISATIONS]  # type: ignore[valid-type]


@dataclass(frozen=True)
class SearchRequest:
    query: str
    mode: str = "hybrid"
    k: int = 10
    book: str | None = None
    levels: list[int] | None = None
    expand_parent: bool = False
    budget: int | None = None  # tokens: build a context (search + expansion) within this budget
    within: str | None = None  # a source_file: search only that node's subtree
    # Fusion settings; None = the SQL default (rag._fusion_settings()).
    fusion: str | None = None
    normalisation: str | None = None
    bm25_weight: float | None = None
    vector_weight: float | None = None
    chapter_weight: float | None = None
    cite_weight: float | None = None
    expand_cited: bool = False  # attach the rows a summary hit's anchors cite (its source paragraphs)

    def params(self) -> dict[str, Any]:
        """The values every rag.search / rag.build_context call binds (the query vector apart)."""
        return {"q": self.query, "mode": self.mode, "k": self.k, "book": self.book, "levels": self.levels,
                "within": self.within, "fusion": self.fusion, "norm": self.normalisation,
                "bw": self.bm25_weight, "vw": self.vector_weight, "cw": self.chapter_weight,
                "tw": self.cite_weight}


#: rag._check_search_args refuses longer queries too; checked here first because embedding a
#: 100 KB query costs a minute before the database could say no.
MAX_QUERY_CHARS = 10_000
INT4 = range(-2**31, 2**31)


def check_query(query: str) -> str:
    """The query as searched: NFC-normalised (a word typed with combining accents finds the
    same rows as the precomposed one), refused when it cannot be searched."""
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = query[exc.start].encode("utf-8", "surrogateescape")
        raise BookragError(f"the query is not valid UTF-8 (byte 0x{bad.hex()} at character {exc.start + 1}); "
                           "type it again or check the terminal's encoding") from None
    if "\x00" in query:
        raise BookragError("the query contains a NUL character; remove it")
    if not query.strip():
        raise BookragError("the query is empty: give at least one word to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise BookragError(f"query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    return unicodedata.normalize("NFC", query)


def check_int(name: str, value: int | None) -> int | None:
    """Integers the SQL functions take as INT: a larger one is refused here, by name (psycopg would
    send it as a bigint and PostgreSQL would look for another function)."""
    if value is not None and value not in INT4:
        raise BookragError(f"{name} is out of range: {value}")
    return value


def corpus_model(conn: psycopg.Connection) -> tuple[str, int] | None:
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute("SELECT model, dimension FROM rag._corpus_model(NULL)").fetchone()
    return (row[0], row[1]) if row and row[0] else None


def embed_query(conn: psycopg.Connection, text: str) -> np.ndarray | None:
    """The query vector from the corpus's own model (query role), or None when no vector is loaded."""
    from loader.embedding import embedder_for_model

    model = corpus_model(conn)
    if model is None:
        return None
    return embedder_for_model(model[0]).query(text)


def _sql_error(exc: psycopg.Error) -> BookragError:
    diag = exc.diag.message_primary if exc.diag and exc.diag.message_primary else str(exc)
    return BookragError(diag)


SEARCH_CALL = ("rag.search(%(q)s, %(e)s, %(mode)s, %(k)s, %(book)s, %(levels)s::int[], NULL, %(within)s, "
               "%(fusion)s, %(norm)s, %(bw)s::float8, %(vw)s::float8, %(cw)s::float8, %(tw)s::float8)")
CONTEXT_CALL = ("rag.build_context(%(q)s, %(e)s, %(budget)s, %(k)s, %(book)s, %(levels)s::int[], NULL, %(expand)s, "
                "%(mode)s, %(within)s, %(fusion)s, %(norm)s, %(bw)s::float8, %(vw)s::float8, %(cw)s::float8, "
                "%(tw)s::float8)")


#: A hit's parent node, as a JSON array in chunk order (rag.get_node of its parent_source_file:
#: what rag.get_parent returns, without looking the hit's row up again).
PARENT_EXPANSION = (", (SELECT coalesce(json_agg(row_to_json(p) ORDER BY p.chunk_index), '[]'::json) "
                    "FROM rag.get_node(h.parent_source_file) p) AS parent")


#: What a summary hit's anchors cite, compactly: [{source_file, paragraphs}] (empty for paragraphs).
CITES = (", (SELECT coalesce(json_agg(json_build_object('source_file', c.f, 'paragraphs', c.p) ORDER BY c.f), '[]'::json) "
         "FROM (SELECT cited_source_file AS f, array_agg(cited_paragraph ORDER BY cited_paragraph) "
         "FILTER (WHERE cited_paragraph IS NOT NULL) AS p FROM rag.citations "
         "WHERE source_file = h.source_file AND chunk_index = h.chunk_index GROUP BY cited_source_file) c) AS cites")

#: The rows a summary hit cites (rag.get_citations), as a JSON array in reading order.
CITED_EXPANSION = (", (SELECT coalesce(json_agg(row_to_json(c) ORDER BY c.node_order, c.chunk_index), '[]'::json) "
                   "FROM rag.get_citations(h.source_file, h.chunk_index) c) AS cited")


def _fetch(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(sql, params).fetchall()
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.RaiseException) as exc:
        conn.rollback()
        raise _sql_error(exc) from exc
    conn.rollback()  # read-only: end the transaction so the connection stays clean
    return rows


def search(conn: psycopg.Connection, req: SearchRequest, embedding: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Ranked hits of rag.search (dicts with the rag.search_hit columns, and `cites`), each with `parent` rows when
    expand_parent. Modes, fusion names and bounds are checked by the SQL, whose message a
    BookragError carries."""
    query = check_query(req.query)
    check_int("k", req.k)
    if embedding is None and req.mode != "bm25":
        embedding = embed_query(conn, query)
    if req.mode == "vector" and embedding is None:
        raise BookragError("no vectors are loaded: vector search needs an embedded corpus (try --mode bm25)")
    extra = CITES + (PARENT_EXPANSION if req.expand_parent else "") + (CITED_EXPANSION if req.expand_cited else "")
    return _fetch(conn, f"SELECT h.*{extra} FROM {SEARCH_CALL} h ORDER BY h.rank",
                  {**req.params(), "q": query, "e": embedding})


def build_context(conn: psycopg.Connection, req: SearchRequest, embedding: np.ndarray | None = None) -> list[dict[str, Any]]:
    """rag.build_context rows: search + parent expansion within req.budget tokens, reading order
    (3,000 tokens when req.budget is None; the SQL function refuses a budget out of its range)."""
    query = check_query(req.query)
    check_int("k", req.k)
    check_int("budget", req.budget)
    if embedding is None and req.mode != "bm25":
        embedding = embed_query(conn, query)
    return _fetch(conn, f"SELECT * FROM {CONTEXT_CALL}",
                  {**req.params(), "q": query, "e": embedding, "budget": 3000 if req.budget is None else req.budget,
                   "expand": req.expand_parent})


def cited_rows(conn: psycopg.Connection, rows: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """For each summary row of a context, the rows its anchors cite (rag.get_citations), by (source_file, chunk_index)."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        if r["node_type"] == "summary":
            out[(r["source_file"], r["chunk_index"])] = _fetch(
                conn, "SELECT * FROM rag.get_citations(%(f)s, %(c)s)", {"f": r["source_file"], "c": r["chunk_index"]})
    return out


def vector_literal(vec: np.ndarray) -> str:
    """pgvector's text form, e.g. [0.1,-0.2,…], for psql users."""
    return "[" + ",".join(f"{float(v):.7g}" for v in vec) + "]"
