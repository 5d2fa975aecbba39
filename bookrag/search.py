"""Python's side of retrieval: embed the query with the corpus model, call one SQL function.

Nothing here ranks, fuses or expands: rag.search_*, rag.build_context and rag.pack_context do
(a context alone is rag.build_context; hits and the context packed from them, in one statement, are
rag.pack_context over the hits held). Used by the CLI (`bookrag search`, `bookrag embed`) and the
MCP server."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np
import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from bookrag.errors import BookragError, database_reason
from bookrag.links import node_of_url, shows_paragraph

#: The names rag.search accepts, its default first (the SQL checks them and resolves 'auto'; this
#: tuple feeds the CLI's choices). Tuning names, defaults and bounds are rag._settings's.
MODES = ("auto", "hybrid", "two-stage", "bm25", "vector")
Mode = Literal[MODES]  # type: ignore[valid-type]


def _arg(name: str, cast: str = "") -> dict[str, Any]:
    """A SearchRequest field's SQL argument: its name in rag.search, with a cast where psycopg's
    type would not pick the function."""
    return {"sql": name, "cast": cast}


@dataclass(frozen=True)
class SearchRequest:
    """One search, as the SQL functions take it. Each field names the argument it binds: adding
    a parameter to rag.search is adding a field here (the calls below are built from them)."""

    query: str = field(metadata=_arg("p_query"))
    mode: str = field(default=MODES[0], metadata=_arg("p_mode"))
    k: int = field(default=10, metadata=_arg("p_k"))
    book: str | None = field(default=None, metadata=_arg("p_book"))
    levels: list[int] | None = field(default=None, metadata=_arg("p_levels", "::int[]"))
    expand_parent: bool = False  # attach each hit's parent node (p_expand 'parent'; a context's too)
    budget: int | None = None  # tokens: build a context (search + expansion) within this budget
    within: str | None = field(default=None, metadata=_arg("p_within"))  # only that node's subtree
    expand_cited: bool = False  # attach the rows a summary hit's anchors cite (p_expand 'cited')
    # Named settings for measurement (rag._settings checks the names and values); None = the defaults.
    tuning: dict[str, Any] | None = field(default=None, metadata=_arg("p_tuning", "::jsonb"))
    # Other wordings of the same question, searched with it and fused (rag.search_phrasings).
    phrasings: tuple[str, ...] = ()
    phrasing_fusion: str = "rrf"  # rag.search_phrasings's p_fusion

    def expand(self) -> list[str] | None:
        """rag.search's p_expand."""
        return [
            name for name, on in (("parent", self.expand_parent), ("cited", self.expand_cited)) if on
        ] or None

    def check_ints(self) -> None:
        """Every integer field is bound as INT: a value beyond it is refused here, by name (see
        check_int), for the fields there are now and any added later."""
        for f in fields(self):
            if f.type in ("int", "int | None"):
                check_int(f.name, getattr(self, f.name))

    def params(self, conn: psycopg.Connection) -> dict[str, Any]:
        """Every value the calls below bind, by field name (the query vector and model apart);
        `within` as resolve_node reads it (one lookup, only when set)."""
        within = self.within if self.within is None else resolve_node(conn, self.within) or self.within
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "expand": self.expand(),
            "within": within,
            "tuning": None if self.tuning is None else Jsonb(self.tuning),
        }


def node_candidates(text: str) -> list[str]:
    """What a node's name most likely meant, in order: the text itself; the page a reading-room URL
    shows (bookrag.links.node_of_url); the path without its query or anchor (`?hl=6`, `#p6`) or a
    leading `./` or `/`, with `corpus/` in front when missing; a folder (no `.md`) as its source.md
    when the anchor points at a paragraph, else its summary.md. Agents and users paste all of these."""
    url = urlsplit(text.strip())
    base = url.path.strip().removeprefix("./").lstrip("/")
    if base and not base.startswith("corpus/"):
        base = f"corpus/{base}"
    out = [text, node_of_url(text), base]
    if base and not base.endswith(".md"):
        out.append(f"{base.rstrip('/')}/{'source.md' if shows_paragraph(url) else 'summary.md'}")
    return list(dict.fromkeys(c for c in out if c))


def resolve_node(conn: psycopg.Connection, text: str) -> str | None:
    """The loaded node's source_file that `text` names (node_candidates, first loaded one wins), or None."""
    with conn.cursor(row_factory=tuple_row) as cur:
        row = cur.execute(
            "SELECT c.f FROM unnest(%s::text[]) WITH ORDINALITY AS c(f, i) WHERE EXISTS (SELECT 1 FROM "
            "rag.hierarchical_content_nodes n WHERE n.source_file = c.f) ORDER BY c.i LIMIT 1",
            (node_candidates(text),),
        ).fetchone()
    return row[0] if row else None


def _call(function: str, extra: str) -> str:
    """`function(p_x => %(x)s, …)` over SearchRequest's SQL arguments, the query vector and `extra`."""
    args = [
        f"{f.metadata['sql']} => %({f.name})s{f.metadata['cast']}"
        for f in fields(SearchRequest)
        if f.metadata
    ]
    return f"{function}({', '.join(args[:1] + ['p_query_embedding => %(e)s'] + args[1:] + [extra])})"


#: How rag._search_hits's refusal of a query vector from another model than the corpus's begins
#: (p_query_model): a caller that keeps the model reads it again when it sees this.
MODEL_REFUSED = "the query was embedded with "

#: rag._check_search_args refuses longer queries too; checked here first because embedding a
#: 100 KB query costs a minute before the database could say no.
MAX_QUERY_CHARS = 10_000
INT4 = range(-(2**31), 2**31)


def check_query(query: str) -> str:
    """The query as searched: NFC-normalised (a word typed with combining accents finds the
    same rows as the precomposed one), refused when it cannot be searched."""
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = query[exc.start].encode("utf-8", "surrogateescape")
        raise BookragError(
            f"the query is not valid UTF-8 (byte 0x{bad.hex()} at character {exc.start + 1}); "
            "type it again or check the terminal's encoding"
        ) from None
    if "\x00" in query:
        raise BookragError("the query contains a NUL character; remove it")
    if not query.strip():
        raise BookragError("the query is empty: give at least one word to search for")
    if len(query) > MAX_QUERY_CHARS:
        raise BookragError(f"query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    return unicodedata.normalize("NFC", query)


def check_phrasings(phrasings: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Each phrasing checked and normalised as a query is (the SQL checks their number, that
    none is empty and that none repeats another)."""
    out = []
    for i, text in enumerate(phrasings, start=1):
        if not text.strip():
            raise BookragError(f"phrasing {i} is empty")
        try:
            out.append(check_query(text))
        except BookragError as exc:
            raise BookragError(f"phrasing {i}: {exc}") from None
    return tuple(out)


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


def query_vector(model: str, text: str) -> np.ndarray:
    """The query vector of `text` by `model` (query role); thread-safe for the local model."""
    from loader.embedding import embedder_for_model

    return embedder_for_model(model).query(text)


def query_vectors(model: str, texts: list[str]) -> np.ndarray:
    """The query vectors of several texts by `model`, in one batch."""
    from loader.embedding import embedder_for_model

    return embedder_for_model(model).queries(texts)


def embed_query_with_model(conn: psycopg.Connection, text: str) -> tuple[np.ndarray | None, str | None]:
    """The query vector from the corpus's own model (query role) and that model's name, or
    (None, None) when no vector is loaded."""
    model = corpus_model(conn)
    if model is None:
        return None, None
    return query_vector(model[0], text), model[0]


def embed_query(conn: psycopg.Connection, text: str) -> np.ndarray | None:
    """The query vector from the corpus's own model, or None when no vector is loaded."""
    return embed_query_with_model(conn, text)[0]


def _sql_error(exc: psycopg.Error) -> BookragError:
    return BookragError(database_reason(exc))


SEARCH_CALL = _call("rag.search", "p_expand => %(expand)s::text[], p_query_model => %(model)s")
#: rag.build_context with every SearchRequest argument (it takes rag.search's arguments by name).
CONTEXT_CALL = _call(
    "rag.build_context",
    "p_budget => %(budget)s, p_expand => %(pack_expand)s::text[], p_query_model => %(model)s",
)
#: One round trip for a search and the context packed from its first hits (rag.pack_context),
#: both as JSON; context is NULL when no budget is given.
SEARCH_AND_PACK = (
    f"WITH h AS MATERIALIZED (SELECT * FROM {SEARCH_CALL}) "
    "SELECT (SELECT coalesce(json_agg(h ORDER BY h.rank), '[]'::json) FROM h) AS hits, "
    "CASE WHEN %(budget)s::int IS NOT NULL THEN (SELECT coalesce(json_agg(c ORDER BY c.book, c.node_order, c.source_file, "
    "c.chunk_index), '[]'::json) FROM rag.pack_context(ARRAY(SELECT h.id FROM h WHERE h.rank <= %(context_k)s "
    "ORDER BY h.rank), %(budget)s, %(pack_expand)s::text[]) c) END AS context"
)


#: rag.search_phrasings over the request (the query, its phrasings and their vectors): each hit
#: as JSON, the list's row with the fused rank and score and which wordings found it; and, as
#: SEARCH_AND_PACK, the context packed from its first hits.
PHRASINGS_AND_PACK = (
    "WITH s AS MATERIALIZED (SELECT * FROM rag.search_phrasings(%(query)s, %(e)s, %(phrasings)s::text[], "
    "%(pe)s::vector[], p_k => %(k)s, p_book => %(book)s, p_levels => %(levels)s::int[], p_within => %(within)s, "
    "p_expand => %(expand)s::text[], p_query_model => %(model)s, p_mode => %(mode)s, p_fusion => %(phrasing_fusion)s)) "
    "SELECT (SELECT coalesce(json_agg(to_jsonb(s.hit) || jsonb_build_object('rank', s.rank, 'score', s.score, "
    "'found_by', s.found_by, 'phrasing_ranks', s.phrasing_ranks) ORDER BY s.rank), '[]'::json) FROM s) AS hits, "
    "CASE WHEN %(budget)s::int IS NOT NULL THEN (SELECT coalesce(json_agg(c ORDER BY c.book, c.node_order, c.source_file, "
    "c.chunk_index), '[]'::json) FROM rag.pack_context(ARRAY(SELECT (s.hit).id FROM s WHERE s.rank <= %(context_k)s "
    "ORDER BY s.rank), %(budget)s, %(pack_expand)s::text[]) c) END AS context"
)


def embed_all(
    conn: psycopg.Connection, req: SearchRequest
) -> tuple[np.ndarray | None, list[np.ndarray] | None, str | None]:
    """The query's vector, its phrasings' vectors and the corpus model (one batch), or Nones
    when the mode reads no vector or no vector is loaded."""
    if req.mode == "bm25":
        return None, None, None
    model = corpus_model(conn)
    if model is None:
        return None, None, None
    vectors = query_vectors(model[0], [req.query, *req.phrasings])
    return vectors[0], (list(vectors[1:]) if req.phrasings else None), model[0]


def _fetch(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(sql, params).fetchall()
    except (psycopg.errors.InvalidParameterValue, psycopg.errors.RaiseException) as exc:
        conn.rollback()
        raise _sql_error(exc) from exc
    conn.rollback()  # read-only: end the transaction so the connection stays clean
    return rows


def _check_vector(req: SearchRequest, embedding: np.ndarray | None) -> None:
    if req.mode == "vector" and embedding is None:
        raise BookragError("no vectors are loaded: vector search needs an embedded corpus (try --mode bm25)")


def search(
    conn: psycopg.Connection,
    req: SearchRequest,
    embedding: np.ndarray | None = None,
    model: str | None = None,
    phrasing_embeddings: list[np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """Ranked hits of rag.search (dicts with the rag.search_hit columns: the hit, `cites`, and
    `parent` / `cited` rows when asked), or of rag.search_phrasings when req.phrasings (then
    also `found_by` and `phrasing_ranks`). Modes, fusion names, bounds and the expansions are
    checked by the SQL, whose message a BookragError carries. `model` names the model
    `embedding` came from (rag.search refuses another than the corpus's)."""
    if req.phrasings:
        return search_and_pack(conn, req, embedding, model, req.k, phrasing_embeddings)[0]
    query = check_query(req.query)
    req.check_ints()
    if embedding is None and req.mode != "bm25":
        embedding, model = embed_query_with_model(conn, query)
    _check_vector(req, embedding)
    return _fetch(
        conn,
        f"SELECT * FROM {SEARCH_CALL}",
        {**req.params(conn), "query": query, "e": embedding, "model": model},
    )


def search_and_pack(
    conn: psycopg.Connection,
    req: SearchRequest,
    embedding: np.ndarray | None,
    model: str | None,
    context_k: int,
    phrasing_embeddings: list[np.ndarray] | None = None,
    *,
    pack_parents: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """rag.search's hits (rag.search_phrasings's when req.phrasings) and, when req.budget, the
    context rag.pack_context builds from the first context_k of them (each with its parent when
    pack_parents), in one statement: one search, one round trip. Phrasings without their vectors are embedded here
    (with the query, in one batch) when the query has none."""
    query = check_query(req.query)
    phrasings = check_phrasings(req.phrasings)
    if phrasings and req.tuning:  # rag.search_phrasings runs each wording with the defaults
        raise BookragError(
            f"tuning ({', '.join(req.tuning)}) tunes one wording's ranking; with phrasings every "
            "wording is searched with the defaults: drop one or the other"
        )
    req.check_ints()
    if phrasings and embedding is None and req.mode != "bm25":
        embedding, phrasing_embeddings, model = embed_all(conn, req)
    _check_vector(req, embedding)
    params = {
        **req.params(conn),
        "query": query,
        "e": embedding,
        "model": model,
        "budget": req.budget,
        "context_k": context_k,
        "phrasings": list(phrasings),
        "pe": phrasing_embeddings,
        "pack_expand": ["parent"] if pack_parents else None,
    }
    row = _fetch(conn, PHRASINGS_AND_PACK if phrasings else SEARCH_AND_PACK, params)[0]
    return row["hits"], row["context"]


def build_context(
    conn: psycopg.Connection,
    req: SearchRequest,
    embedding: np.ndarray | None = None,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """rag.build_context's rows for every field of req: search + parent expansion within req.budget
    tokens, reading order (3,000 tokens when req.budget is None; rag.pack_context refuses a budget
    out of its range)."""
    query = check_query(req.query)
    req.check_ints()
    if embedding is None and req.mode != "bm25":
        embedding, model = embed_query_with_model(conn, query)
    _check_vector(req, embedding)
    return _fetch(
        conn,
        f"SELECT * FROM {CONTEXT_CALL}",
        {
            **req.params(conn),
            "pack_expand": ["parent"] if req.expand_parent else None,
            "query": query,
            "e": embedding,
            "model": model,
            "budget": 3000 if req.budget is None else req.budget,
        },
    )


def outline(conn: psycopg.Connection, book: str) -> list[dict[str, Any]]:
    """rag.outline's rows for one book: every node in document order, with its size."""
    return _fetch(conn, "SELECT * FROM rag.outline(%(book)s)", {"book": book})


def cited_rows(
    conn: psycopg.Connection, rows: list[dict[str, Any]]
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """For each summary row of a context, the rows its anchors cite (rag.get_citations), by
    (source_file, chunk_index); one statement for the whole context."""
    keys = [(r["source_file"], r["chunk_index"]) for r in rows if r["node_type"] == "summary"]
    out: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in keys}
    if keys:
        cited = _fetch(
            conn,
            "SELECT u.f AS citing_source_file, g.* FROM unnest(%(f)s::text[], %(c)s::int[]) "
            "WITH ORDINALITY AS u(f, c, o) CROSS JOIN LATERAL rag.get_citations(u.f, u.c) "
            "WITH ORDINALITY AS g ORDER BY u.o, g.ordinality",
            {"f": [k[0] for k in keys], "c": [k[1] for k in keys]},
        )
        for r in cited:
            out[(r["citing_source_file"], r["citing_chunk_index"])].append(r)
    return out


def vector_literal(vec: np.ndarray) -> str:
    """pgvector's text form, e.g. [0.1,-0.2,…], for psql users."""
    return "[" + ",".join(f"{float(v):.7g}" for v in vec) + "]"
