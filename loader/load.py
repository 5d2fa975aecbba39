"""Load sidecars into rag.hierarchical_content_nodes: checked first, then all or nothing.

Checks (before touching the database): each sidecar parses (manifest first, chunk_count =
lines, indices 0..n-1, vector length = dimension, finite numbers); its .md exists and still
has the hash the sidecar was written from, and its chunks are that .md's paragraphs (so a
chunk edited in the sidecar is refused even when the hash was kept); its parent's sidecar
exists (only a book's root summary.md has no parent); what its summary chunks cite exists
(paragraphs of the section's source.md, or child summaries); its embedding model is a known
one, the same for every sidecar, and the same as the database's. Then, under the loader's lock
(loader_lock: two loaders are serialized, the second waits and says so), in one transaction:
unchanged files are skipped, changed files' rows deleted and
re-inserted with COPY, and, for books loaded whole, rows of files that no longer exist
removed. Any error rolls everything back.
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from bookrag.errors import BookragError, database_reason
from loader import author_summary, endnotes, frontmatter
from loader.anchors import strip_anchors
from loader.chunking import paragraphs
from loader.embedding import known_models
from loader.manifest import Book, book_tree, load_book
from loader.sidecars import Sidecar, file_hash, read_sidecar

LOCK_KEY = 4_242_001  # the advisory lock key every `bookrag load` (and `remove`) holds: loader_lock
LOCK_POLL_S = 0.2  # how often a waiting loader asks for the lock again


@dataclass
class LoadReport:
    inserted: int = 0  # files new to the database
    replaced: int = 0  # files whose rows were replaced (content, model or order changed)
    unchanged: int = 0
    removed: int = 0  # files deleted from the database (gone from a book loaded whole)
    rows_written: int = 0
    books: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.inserted} inserted, {self.replaced} replaced, {self.unchanged} unchanged, "
            f"{self.removed} removed ({self.rows_written} rows written; books: {', '.join(self.books) or '-'})"
        )


def collect(home: Path, paths: list[Path]) -> tuple[list[Path], set[str]]:
    """Sidecars named by paths (files or folders; none = the whole corpus) and the books
    covered whole (a book folder or the corpus was given)."""
    corpus = home / "corpus"
    targets = paths or [corpus]
    sidecars: list[Path] = []
    whole: set[str] = set()
    for p in targets:
        p = p.resolve()
        if p.is_dir():
            found = sorted(p.rglob("*.md.jsonl"))
            if not found:
                raise BookragError(f"{p}: no sidecars (*.md.jsonl) found; run `bookrag sidecars` first")
            sidecars += found
            if p == corpus:
                whole |= {d.name for d in corpus.iterdir() if d.is_dir()}
            elif p.parent == corpus:
                whole.add(p.name)
        elif p.name.endswith(".md.jsonl"):
            sidecars.append(p)
        elif p.suffix == ".md":
            sidecars.append(p.with_name(p.name + ".jsonl"))
        else:
            raise BookragError(f"{p}: not a sidecar, a .md or a folder")
    return sorted(set(sidecars)), whole


def _book_orders(home: Path, books: set[str]) -> tuple[dict[str, int], dict[str, Book]]:
    orders: dict[str, int] = {}
    manifests: dict[str, Book] = {}
    for slug in books:
        path = home / "corpus" / slug / "book.toml"
        if path.exists():
            book = load_book(path)
            manifests[slug] = book
            orders.update({n.source_file: n.order for n in book_tree(book)})
    return orders, manifests


def check(home: Path, sidecars: list[Path]) -> list[Sidecar]:
    """Read and check every sidecar against the files on disk; raise on the first problem."""
    out = []
    models: dict[str, str] = {}
    for path in sidecars:
        sc = read_sidecar(path)
        m = sc.manifest
        rel = path.relative_to(home).as_posix() if path.is_relative_to(home) else str(path)
        if m["source_file"] + ".jsonl" != rel:
            raise BookragError(f"{path}:1: source_file is {m['source_file']!r} but the sidecar sits at {rel}")
        md = home / m["source_file"]
        if not md.exists():
            raise BookragError(f"{path}:1: its file {m['source_file']} does not exist")
        if file_hash(md) != m["source_file_hash"]:
            raise BookragError(
                f"{md}: changed since its sidecar was written; run `bookrag sidecars {md.relative_to(home)}`"
            )
        _check_text(home, path, sc)
        parent = m["parent_source_file"]
        book = m["source_file"].split("/")[1]
        root = f"corpus/{book}/summary.md"
        if parent is None and m["source_file"] != root:
            raise BookragError(
                f"{path}:1: parent_source_file is null but only the book root ({root}) has no parent"
            )
        if parent is not None and not (home / (parent + ".jsonl")).exists():
            raise BookragError(f"{path}:1: parent {parent} has no sidecar ({parent}.jsonl missing)")
        model = m.get("embedding_model")
        if model is not None:
            known = known_models()
            if model not in known:
                raise BookragError(
                    f"{path}:1: unknown embedding model {model!r} (known: {', '.join(sorted(known))}; "
                    "set BOOKRAG_EMBEDDING_MODEL and BOOKRAG_EMBEDDING_DIMENSION for another)"
                )
            if not 1 <= m["dimension"] <= 2000:  # pgvector's HNSW indexes at most 2,000 dimensions
                raise BookragError(
                    f"{path}:1: dimension {m['dimension']} is over the 2,000 an HNSW index takes"
                )
            if m["dimension"] != known[model]:
                raise BookragError(
                    f"{path}:1: model {model} has dimension {known[model]}, the manifest says {m['dimension']}"
                )
            models.setdefault(model, str(path))
        _check_cites(home, path, sc)
        out.append(sc)
    if len(models) > 1:
        (a, pa), (b, pb) = list(models.items())[:2]
        raise BookragError(
            f"sidecars mix embedding models: {a} ({pa}) and {b} ({pb}); regenerate them with one model"
        )
    return out


def _check_text(home: Path, path: Path, sc: Sidecar) -> None:
    """The chunks, joined per paragraph, are the .md's paragraphs (anchors stripped), and those
    marked `kind: author_summary` are the ones its frontmatter lists as the author's summaries."""
    meta, body = frontmatter.read(home / sc.source_file)
    paras = paragraphs(body)
    marked = set(author_summary.paragraphs_of(meta, home / sc.source_file, len(paras)))
    for n, c in enumerate(sc.chunks, start=2):
        if (c.get("kind") == author_summary.KIND) != (c["paragraph"] in marked):
            raise BookragError(
                f"{path}:{n}: kind {c.get('kind', 'text')!r}, but {sc.source_file} "
                f"{'lists' if c['paragraph'] in marked else 'does not list'} paragraph {c['paragraph']} "
                f"in {author_summary.FIELD}; run `bookrag sidecars {sc.source_file}`"
            )
    if sc.manifest["node_type"] == "summary":
        extractive = meta.get("generator") == "extractive"
        for n, c in enumerate(sc.chunks, start=2):
            if (c.get("kind") == author_summary.EXTRACTIVE) != extractive:
                raise BookragError(
                    f"{path}:{n}: kind {c.get('kind', 'text')!r}, but {sc.source_file} was written by "
                    f"{meta.get('generator')!r}; run `bookrag sidecars {sc.source_file}`"
                )
        paras = [strip_anchors(p) for p in paras]
    joined: dict[int, list[str]] = {}
    first_line: dict[int, int] = {}
    for n, c in enumerate(sc.chunks, start=2):
        joined.setdefault(c["paragraph"], []).append(c["text"])
        first_line.setdefault(c["paragraph"], n)
    if sorted(joined) != list(range(1, len(paras) + 1)):
        raise BookragError(
            f"{path}:1: its chunks cover paragraphs {_ranges(sorted(joined))} but {sc.source_file} has "
            f"{len(paras)}; run `bookrag sidecars {sc.source_file}`"
        )
    for number, texts in joined.items():
        if " ".join(texts) != paras[number - 1]:
            raise BookragError(
                f"{path}:{first_line[number]}: chunk text differs from paragraph {number} of {sc.source_file} "
                f"(edited by hand?); run `bookrag sidecars {sc.source_file}`"
            )


def _ranges(numbers: list[int]) -> str:
    return f"{numbers[0]}-{numbers[-1]}" if numbers else "none"


def _check_cites(home: Path, path: Path, sc: Sidecar) -> None:
    """Every cited paragraph or child exists: a dangling anchor refuses the load. A source
    chunk cites exactly the end notes its text calls (loader.endnotes)."""
    cache: dict[str, int] = {}
    notes: dict[str, str] | None = None
    for n, c in enumerate(sc.chunks, start=2):
        if sc.manifest["node_type"] == "source" and (c.get("cites") or "(_" in c["text"]):
            if notes is None:
                notes = endnotes.book_notes(home, sc.source_file.split("/")[1])
            labels = endnotes.called_labels(c["text"]) if notes else []
            cited_files = [cite["source_file"] for cite in c.get("cites") or []]
            if cited_files != [notes.get(label) for label in labels]:
                calls = ", ".join(f"(_{label}_)" for label in labels) or "no end note"
                raise BookragError(
                    f"{path}:{n}: cites {', '.join(cited_files) or 'nothing'}, but its text calls {calls}; "
                    f"run `bookrag sidecars {sc.source_file}`"
                )
        for cite in c.get("cites") or []:
            cited = cite["source_file"]
            md = home / cited
            if not md.exists():
                raise BookragError(
                    f"{path}:{n}: cites {cited}, which does not exist (prepare the book, or fix the anchor)"
                )
            if sc.manifest["node_type"] == "source":
                continue  # an end note the text calls (checked above)
            if "paragraphs" in cite:
                if cited not in cache:
                    cache[cited] = len(paragraphs(frontmatter.read(md)[1]))
                beyond = [p for p in cite["paragraphs"] if p > cache[cited]]
                if beyond:
                    raise BookragError(
                        f"{path}:{n}: cites paragraph {beyond[0]} of {cited}, which has {cache[cited]}"
                    )
            else:
                meta = frontmatter.read(md)[0]
                if meta.get("parent_source_file") != sc.source_file:
                    raise BookragError(f"{path}:{n}: cites {cited}, which is not a child of {sc.source_file}")
        cited_here = {p for cite in c.get("cites") or [] for p in cite.get("paragraphs") or []}
        for i, s in enumerate(c.get("sentences") or [], start=1):
            stray = sorted(set(s["paragraphs"]) - cited_here)
            if stray:
                raise BookragError(
                    f"{path}:{n}: sentence {i} cites paragraph {stray[0]}, which its chunk's cites do not "
                    "(regenerate the sidecar with `bookrag sidecars`)"
                )


@contextlib.contextmanager
def loader_lock(conn: psycopg.Connection) -> Iterator[None]:
    """LOCK_KEY held by this session around a whole load or removal: its transaction, then the
    index merge and the statistics after the commit (a second loader's CREATE INDEX IF NOT EXISTS
    against the first one's REINDEX CONCURRENTLY was a deadlock, and one load failed). A second
    loader waits, saying so once on stderr. It asks with pg_try_advisory_lock, between
    transactions: blocked inside one, it would hold a snapshot that the first loader's REINDEX
    CONCURRENTLY waits for. The caller's connection must not be in a transaction."""
    waiting = False
    while not _try_lock(conn):
        if not waiting:
            print("waiting for another load (or removal) to finish…", file=sys.stderr, flush=True)
            waiting = True
        time.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        with contextlib.suppress(psycopg.Error):  # a lost connection has dropped the lock already
            conn.rollback()
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            conn.commit()


def _try_lock(conn: psycopg.Connection) -> bool:
    got = conn.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,)).fetchone()
    conn.commit()
    return bool(got and got[0])


def load(conn: psycopg.Connection, home: Path, paths: list[Path]) -> LoadReport:
    """Check then import, under the loader's lock; the caller's connection must not be in a
    transaction. Any database error rolls the whole load back and comes out as one BookragError."""
    try:
        with loader_lock(conn):
            return _load(conn, home, paths)
    except BookragError:
        raise
    except psycopg.Error as exc:
        raise BookragError(
            f"the database refused the load ({database_reason(exc)}); nothing was loaded"
        ) from exc


def _load(conn: psycopg.Connection, home: Path, paths: list[Path]) -> LoadReport:
    files, whole = collect(home, paths)
    sidecars = check(home, files)
    books = {sc.source_file.split("/")[1] for sc in sidecars}
    orders, manifests = _book_orders(home, books)
    report = LoadReport(books=sorted(books))
    model = next((sc.manifest["embedding_model"] for sc in sidecars if sc.embedded), None)
    with conn.transaction():
        _check_model(conn, model)
        for slug in sorted(books):
            _upsert_book(conn, slug, manifests.get(slug), sidecars)
        state = _db_state(conn, books)
        fallback = _fallback_orders(sidecars, orders)
        for sc in sidecars:
            m = sc.manifest
            order = orders[m["source_file"]] if m["source_file"] in orders else fallback[m["source_file"]]
            current = state.pop(m["source_file"], None)
            wanted = (
                m["source_file_hash"],
                m.get("embedding_model"),
                m["chunk_count"],
                order,
                m["parent_source_file"],
                m["heading_path"],
                m["level"],
                m["node_type"],
                True,
                sorted({c.get("kind", "text") for c in sc.chunks}),
                _sentences_digest(sc),
            )
            if current == wanted:
                report.unchanged += 1
                continue
            if current is not None:
                conn.execute(
                    "DELETE FROM rag.hierarchical_content_nodes WHERE source_file = %s", (m["source_file"],)
                )
                report.replaced += 1
            else:
                report.inserted += 1
            try:
                report.rows_written += _copy_rows(conn, sc, order)
            except psycopg.Error as exc:
                raise BookragError(
                    f"{sc.path}: the database refused its rows ({database_reason(exc)}); nothing was loaded"
                ) from exc
        for source_file in sorted(state):
            if source_file.split("/")[1] in whole:
                conn.execute(
                    "DELETE FROM rag.hierarchical_content_nodes WHERE source_file = %s", (source_file,)
                )
                report.removed += 1
        if model is not None:
            dim = next(sc.manifest["dimension"] for sc in sidecars if sc.embedded)
            conn.execute("SELECT rag._ensure_vector_index(%s, %s)", (model, dim))
        report.warnings += _orphans(conn, home)
    if report.rows_written or report.removed:
        merge_bm25_segments(conn, report)
        analyze(conn)
    return report


def analyze(conn: psycopg.Connection) -> None:
    """Fresh planner statistics once the load has committed (autovacuum would get there later):
    the MCP server's read_only_sql bounds a statement by its plan's row estimates, which without
    them are guesses from the table's size on disk."""
    conn.execute("ANALYZE rag.hierarchical_content_nodes, rag.sentences, rag.citations")
    conn.commit()


def _orphans(conn: psycopg.Connection, home: Path) -> list[str]:
    """Books in the database whose corpus folder is gone: a load only looks at the books it loads,
    so their rows stay until `bookrag remove`."""
    books = [
        r[0]
        for r in conn.execute(
            "SELECT book FROM rag.books UNION SELECT DISTINCT book "
            "FROM rag.hierarchical_content_nodes ORDER BY 1"
        ).fetchall()
    ]
    return [
        f"{b} is in the database but corpus/{b}/ is gone: `bookrag remove {b}` deletes its rows"
        for b in books
        if not (home / "corpus" / b).is_dir()
    ]


def merge_bm25_segments(conn: psycopg.Connection, report: LoadReport) -> None:
    """Each COPY adds pg_search segments (36 after loading the two books), and a query visits
    them all: BM25 top-100 took 3 ms instead of 0.6 ms. Rebuilding the index merges them into
    one. CONCURRENTLY, after the load has committed: a plain REINDEX inside the load queued
    behind any open reader transaction, and every search queued behind it (5 s measured,
    bench/bench_convoy.py); this one lets searches run on the old index meanwhile. It is an
    optimisation: if it fails, the data is loaded and searches are right, only slower."""
    conn.autocommit = True
    try:
        conn.execute("REINDEX INDEX CONCURRENTLY rag.hcn_bm25_idx")
    except psycopg.Error as exc:
        report.warnings.append(
            f"the BM25 index was not merged ({database_reason(exc)}); "
            "searches are right but slower until the next load"
        )
        # REINDEX CONCURRENTLY leaves its half-built copy behind when it fails: drop it.
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'rag' AND c.relname LIKE 'hcn_bm25_idx_ccnew%'"
        ).fetchall():
            conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS rag."{name}"')
    finally:
        conn.autocommit = False


def _check_model(conn: psycopg.Connection, model: str | None) -> None:
    if model is None:
        return
    row = conn.execute(
        "SELECT string_agg(model, ', ') FROM rag.embedding_models WHERE model <> %s", (model,)
    ).fetchone()
    if row and row[0]:
        raise BookragError(
            f"the database holds vectors of {row[0]} but these sidecars use {model}: regenerate the sidecars "
            f"with {row[0]} (BOOKRAG_EMBEDDER / BOOKRAG_EMBEDDING_MODEL), or load into a fresh database"
        )


def _upsert_book(conn: psycopg.Connection, slug: str, book: Book | None, sidecars: list[Sidecar]) -> None:
    if book is not None:
        title, volume, author, year = book.title, book.volume, book.author, book.year
        lang, policy = book.language, book.policy
    else:
        root = next((sc for sc in sidecars if sc.source_file == f"corpus/{slug}/summary.md"), None)
        heading = root.manifest["heading_path"] if root else slug
        title, volume, author, year, lang, policy = (
            heading.removesuffix(" (résumé)"),
            None,
            None,
            None,
            "fr",
            "all",
        )
    conn.execute(
        "INSERT INTO rag.books (book, title, volume, author, year, language, embedding_policy) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (book) DO UPDATE SET title = EXCLUDED.title, volume = EXCLUDED.volume, author = EXCLUDED.author, "
        "year = EXCLUDED.year, language = EXCLUDED.language, embedding_policy = EXCLUDED.embedding_policy, loaded_at = now()",
        (slug, title, volume, author, year, lang, policy),
    )


def _db_state(conn: psycopg.Connection, books: set[str]) -> dict[str, tuple]:
    rows = conn.execute(
        "SELECT source_file, min(source_file_hash), min(embedding_model), count(*)::int, min(node_order), "
        "min(parent_source_file), min(heading_path), min(level), min(node_type), bool_and(paragraph IS NOT NULL), "
        "array_agg(DISTINCT kind ORDER BY kind), "
        "(SELECT md5(string_agg(s.content || ':' || array_to_string(s.cited_paragraphs, ','), '|' "
        "ORDER BY s.chunk_index, s.sentence_index)) FROM rag.sentences s WHERE s.source_file = n.source_file) "
        "FROM rag.hierarchical_content_nodes n WHERE book = ANY(%s) GROUP BY source_file",
        (sorted(books),),
    ).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def _sentences_digest(sc: Sidecar) -> str | None:
    """What _db_state computes from rag.sentences for the file: md5 of its sentences and their
    paragraphs in order (None without sentences), so a changed sentence reloads its file."""
    parts = [
        f"{s['text']}:{','.join(str(p) for p in s['paragraphs'])}"
        for c in sc.chunks
        for s in c.get("sentences") or []
    ]
    return hashlib.md5("|".join(parts).encode("utf-8")).hexdigest() if parts else None


def _fallback_orders(sidecars: list[Sidecar], orders: dict[str, int]) -> dict[str, int]:
    """Document order for files no manifest places (e.g. generated corpora): after the
    manifest's nodes, summaries before the source they summarise, by path."""
    base = max(orders.values(), default=-1) + 1
    rest = sorted(
        (sc.source_file for sc in sidecars if sc.source_file not in orders),
        key=lambda f: (f.rsplit("/", 1)[0], not f.endswith("summary.md")),
    )
    return {f: base + i for i, f in enumerate(rest)}


def _copy_rows(conn: psycopg.Connection, sc: Sidecar, order: int) -> int:
    m = sc.manifest
    cols = (
        "level, parent_source_file, node_type, source_file, source_file_hash, chunk_index, heading_path, "
        "content, content_token_count, embedding_model, embedding, node_order, paragraph, kind"
    )
    with conn.cursor() as cur, cur.copy(f"COPY rag.hierarchical_content_nodes ({cols}) FROM STDIN") as copy:
        for c in sc.chunks:
            emb = c.get("embedding")
            copy.write_row(
                (
                    m["level"],
                    m["parent_source_file"],
                    m["node_type"],
                    m["source_file"],
                    m["source_file_hash"],
                    c["chunk_index"],
                    m["heading_path"],
                    c["text"],
                    c["content_token_count"],
                    m.get("embedding_model"),
                    None if emb is None else _vector_literal(emb),
                    order,
                    c["paragraph"],
                    c.get("kind", "text"),
                )
            )
    cites = [
        (m["source_file"], c["chunk_index"], cite["source_file"], p)
        for c in sc.chunks
        for cite in c.get("cites") or []
        for p in cite.get("paragraphs") or [None]
    ]
    if cites:
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY rag.citations (source_file, chunk_index, cited_source_file, cited_paragraph) FROM STDIN"
            ) as copy,
        ):
            for row in cites:
                copy.write_row(row)
    sentences = [
        (
            m["source_file"],
            c["chunk_index"],
            i,
            s["text"],
            c["cites"][0]["source_file"],
            s["paragraphs"],
            m["embedding_model"],
            _vector_literal(s["embedding"]),
        )
        for c in sc.chunks
        for i, s in enumerate(c.get("sentences") or [])
    ]
    if sentences:
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY rag.sentences (source_file, chunk_index, sentence_index, content, "
                "cited_source_file, cited_paragraphs, embedding_model, embedding) "
                "FROM STDIN"
            ) as copy,
        ):
            for srow in sentences:
                copy.write_row(srow)
    return len(sc.chunks)


def _vector_literal(values: list[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"
