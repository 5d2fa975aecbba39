"""The library of loaded books: what is loaded (`bookrag books`), taking one out (`bookrag
remove`), and building one from its raw text to the database (`bookrag build`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from tqdm import tqdm

from bookrag.config import Settings
from bookrag.errors import BookragError
from loader.load import LoadReport, load, loader_lock
from loader.manifest import Book

#: rag.list_books() (metadata, files, rows, tokens) and, per book, what else a reader asks about:
#: the embedding models of its rows, its summaries, and how many of its paragraphs an anchor cites.
BOOKS_SQL = """
SELECT b.book, b.title, b.volume, b.author, b.year, b.nodes, b.chunks, b.tokens, b.embedded_chunks, b.levels,
       coalesce((SELECT array_agg(DISTINCT n.embedding_model ORDER BY n.embedding_model)
                 FROM rag.hierarchical_content_nodes n
                 WHERE n.book = b.book AND n.embedding_model IS NOT NULL), '{}') AS models,
       (SELECT count(DISTINCT n.source_file) FROM rag.hierarchical_content_nodes n
        WHERE n.book = b.book AND n.node_type = 'summary')::int AS summaries,
       (SELECT count(*) FROM (SELECT DISTINCT n.source_file, n.paragraph FROM rag.hierarchical_content_nodes n
                              WHERE n.book = b.book AND n.level = 0 AND n.paragraph IS NOT NULL) p)::int AS paragraphs,
       (SELECT count(*) FROM (SELECT DISTINCT c.cited_source_file, c.cited_paragraph FROM rag.citations c
                              WHERE c.cited_source_file LIKE 'corpus/' || b.book || '/%'
                                AND c.cited_paragraph IS NOT NULL) p)::int AS cited_paragraphs
FROM rag.list_books() b
ORDER BY b.book
"""


def loaded_books(conn: psycopg.Connection) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(BOOKS_SQL).fetchall()


@dataclass
class Removal:
    book: str
    rows: int
    citations: int
    sentences: int


def removal_plan(conn: psycopg.Connection, book: str) -> Removal:
    """What `remove` would delete; an unknown book is one sentence naming the loaded ones."""
    known = [
        r[0]
        for r in conn.execute(
            "SELECT book FROM rag.books UNION SELECT DISTINCT book "
            "FROM rag.hierarchical_content_nodes ORDER BY 1"
        ).fetchall()
    ]
    conn.rollback()
    if book not in known:
        loaded = ", ".join(known) if known else "none"
        raise BookragError(f"unknown book {book!r}: it is not in the database (loaded: {loaded})")
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM rag.hierarchical_content_nodes WHERE book = %(b)s)::int, "
        "(SELECT count(*) FROM rag.citations c JOIN rag.hierarchical_content_nodes n "
        " ON (n.source_file, n.chunk_index) = (c.source_file, c.chunk_index) WHERE n.book = %(b)s)::int, "
        "(SELECT count(*) FROM rag.sentences WHERE book = %(b)s)::int",
        {"b": book},
    ).fetchone()
    conn.rollback()
    assert counts is not None  # one row of three counts
    rows, citations, sentences = counts
    return Removal(book, rows, citations, sentences)


def remove_book(conn: psycopg.Connection, book: str) -> Removal:
    """Delete a book's rows (their citations and sentences go with them: ON DELETE CASCADE) and its
    registry entry, in one transaction under the loader's lock; on any error nothing changes."""
    plan = removal_plan(conn, book)
    try:
        with loader_lock(conn), conn.transaction():
            conn.execute("DELETE FROM rag.hierarchical_content_nodes WHERE book = %s", (book,))
            conn.execute("DELETE FROM rag.books WHERE book = %s", (book,))
    except psycopg.Error as exc:
        from bookrag.errors import database_reason

        raise BookragError(
            f"the database refused to remove {book!r} ({database_reason(exc)}); nothing was removed"
        ) from exc
    return plan


def embedding_rate(embed: Callable[[list[str]], Any], sample: list[str]) -> float:
    """Inputs per second on this machine now: one timed batch of the real inputs (after a warm-up
    call, so the model's loading is not counted)."""
    embed(sample[:1])
    start = time.perf_counter()
    embed(sample)
    return len(sample) / max(time.perf_counter() - start, 1e-6)


def estimate_line(to_embed: int, rate: float | None) -> str:
    if to_embed == 0 or rate is None:
        return "estimate: nothing to embed (the sidecars are up to date); the load takes seconds"
    seconds = to_embed / rate
    took = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    return (
        f"estimate: about {took} to embed {to_embed} texts (chunks and summary sentences) at {rate:.1f}/s "
        "(measured now), then the load"
    )


def markdown_of(settings: Settings, book: Book) -> list[Path]:
    folder = settings.corpus / book.slug
    return sorted(p for p in folder.rglob("*.md") if p.name in ("source.md", "summary.md"))


def missing_summaries(settings: Settings, book: Book) -> list[str]:
    from loader.summarize import book_tree, summary_nodes

    return [
        n.source_file
        for n in summary_nodes(book_tree(book), None)
        if not (settings.home / n.source_file).exists()
    ]


def build_book(
    settings: Settings, slug: str, provider: str, say: Callable[[str], None] = print, sample_size: int = 16
) -> LoadReport:
    """prepare → (estimate) → summarize → sidecars → load, for one book. The estimate is printed
    before the long steps: the inputs to embed, at a rate measured on a sample of them."""
    from bookrag import db
    from bookrag.migrate import apply_migrations
    from loader.embedding import get_embedder
    from loader.importers import IMPORTERS, importer_for
    from loader.manifest import find_book
    from loader.sidecars import texts_to_embed, write_sidecars
    from loader.summarize import summarize_book

    book = find_book(settings.corpus, slug)
    if book.source_kind in IMPORTERS:
        say(f"prepare   {importer_for(book).prepare(settings, book).line()}")
    else:
        say(f"prepare   {slug}: nothing to prepare (its source.md files are written by hand)")
    missing = missing_summaries(settings, book)
    without_llm = provider == "llm" and not settings.llm_model
    if without_llm and missing:
        raise BookragError(
            f"{slug}: {len(missing)} summaries are missing (e.g. {missing[0]}) and no LLM is configured: "
            "set BOOKRAG_LLM_MODEL, or pass --provider extractive"
        )
    embedder = get_embedder(settings.embedder, settings.embedding_model)
    pending = texts_to_embed(markdown_of(settings, book), settings.home, settings.max_chunk_tokens, embedder)
    rate = embedding_rate(embedder.passages, pending[:sample_size]) if pending else None
    say(estimate_line(len(pending), rate))
    if without_llm:
        say(f"summarize {slug}: every summary is written; none regenerated (no LLM configured)")
    else:
        summarized = summarize_book(settings, book, provider=provider)
        say(f"summarize {slug}: {summarized.line()}")
        if summarized.failed:
            raise BookragError(
                f"{len(summarized.failed)} summaries failed: {', '.join(summarized.failed[:5])}"
            )
    stats = write_sidecars(markdown_of(settings, book), settings.home, settings.max_chunk_tokens, embedder)
    say(f"sidecars  {stats.written} written, {stats.unchanged} unchanged, {stats.embedded()}")
    url = db.database_url(settings)
    apply_migrations(url)
    conn = db.connect(url)
    try:
        report = load(conn, settings.home, [settings.corpus / slug])
    finally:
        conn.close()
    return report


# --- the shelf: every book of corpus/ ---------------------------------------------------------


@dataclass(frozen=True)
class BookState:
    """Whether a book of corpus/ is searchable as it stands: `built` (loaded, every file of its
    tree in the database with the hash it has on disk), `not loaded`, `stale` (loaded, but a file
    changed, is missing or was never loaded) or `skipped` (its text comes from an export that
    `prepare --from` reads, and it is neither prepared nor loaded)."""

    slug: str
    state: str
    reason: str = ""

    def line(self) -> str:
        return f"{self.slug}: {self.state}" + (f" ({self.reason})" if self.reason else "")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def book_states(settings: Settings, conn: psycopg.Connection) -> list[BookState]:
    """The state of every book with a manifest (corpus/*/book.toml), from file hashes alone: no
    embedding, no import. A book is current when the database holds exactly the files of its
    tree, each with the sha256 its .md has now (what `load` compares)."""
    from loader.importers import prepared_by_default
    from loader.manifest import all_books, book_tree
    from loader.sidecars import file_hash

    loaded: dict[str, dict[str, str]] = {}
    for book, source_file, digest in conn.execute(
        "SELECT book, source_file, min(source_file_hash) FROM rag.hierarchical_content_nodes "
        "GROUP BY book, source_file"
    ).fetchall():
        loaded.setdefault(book, {})[source_file] = digest
    conn.rollback()
    out = []
    for book in all_books(settings.corpus):
        files = [n.source_file for n in book_tree(book)]
        rows = loaded.get(book.slug, {})
        missing = [f for f in files if not (settings.home / f).exists()]
        if not rows:
            sources = [f for f in files if f.endswith("/source.md")]
            if not prepared_by_default(book) and sources and all(f in missing for f in sources):
                reason = f"a {book.source_kind} book: `bookrag prepare {book.slug} --from EXPORT` first"
                out.append(BookState(book.slug, "skipped", reason))
            else:
                out.append(BookState(book.slug, "not loaded"))
            continue
        changed = [f for f in files if f not in missing and rows.get(f) != file_hash(settings.home / f)]
        extra = sorted(set(rows) - set(files))
        reasons = []
        if missing:
            reasons.append(f"{_count(len(missing), 'file')} not prepared or written, e.g. {missing[0]}")
        if changed:
            reasons.append(f"{_count(len(changed), 'file')} changed since the load, e.g. {changed[0]}")
        if extra:
            reasons.append(f"{_count(len(extra), 'loaded file')} no longer in its manifest, e.g. {extra[0]}")
        out.append(BookState(book.slug, "stale" if reasons else "built", "; ".join(reasons)))
    return out


@dataclass
class ShelfBook:
    """One book of `build --all`: what was embedded for it, how long it took, what the load did."""

    slug: str
    chunks: int = 0  # texts embedded (chunks and summary sentences)
    seconds: float = 0.0  # prepare, summarize, sidecars and load of this book (wall)
    load: LoadReport | None = None
    error: str | None = None


def build_shelf(
    settings: Settings,
    provider: str,
    say: Callable[[str], None] = print,
    *,
    embedder: Any = None,
    progress: bool = True,
    sample_size: int = 16,
) -> list[ShelfBook]:
    """`bookrag build --all`: every book of corpus/ that is not built (book_states), in three
    passes: prepare and summarize each, one estimate for the whole shelf, then its sidecars and
    its load, book after book (the fewest texts to embed first), under one progress bar. A book that fails is said and the others
    go on (BookragError at the end names them). Resumable: sidecars are written whole, file by
    file, so after Ctrl-C or a crash the next run embeds only the files not yet written."""
    from bookrag import db
    from bookrag.migrate import apply_migrations
    from loader.embedding import get_embedder
    from loader.importers import IMPORTERS, importer_for, prepared_by_default
    from loader.manifest import find_book
    from loader.sidecars import texts_to_embed, write_sidecars
    from loader.summarize import summarize_book

    url = db.database_url(settings)
    apply_migrations(url)
    conn = db.connect(url)
    try:
        states = book_states(settings, conn)
        for st in states:
            say(f"shelf     {st.line()}")
        todo = [ShelfBook(st.slug) for st in states if st.state in ("not loaded", "stale")]
        if not todo:
            say("shelf     every book is built: nothing to do")
            return []
        embedder = embedder or get_embedder(settings.embedder, settings.embedding_model)
        books = {}
        for sb in todo:  # prepare and summarize: seconds each (an LLM's summaries excepted)
            start = time.perf_counter()
            try:
                book = books[sb.slug] = find_book(settings.corpus, sb.slug)
                if book.source_kind in IMPORTERS and prepared_by_default(book):
                    say(f"prepare   {importer_for(book).prepare(settings, book).line()}")
                missing = missing_summaries(settings, book)
                if provider == "llm" and not settings.llm_model:
                    if missing:
                        raise BookragError(
                            f"{len(missing)} summaries are missing (e.g. {missing[0]}) and no LLM is "
                            "configured: set BOOKRAG_LLM_MODEL, or pass --provider extractive"
                        )
                else:
                    report = summarize_book(settings, book, provider=provider, progress=False)
                    say(f"summarize {sb.slug}: {report.line()}")
                    if report.failed:
                        raise BookragError(
                            f"{len(report.failed)} summaries failed: {', '.join(report.failed[:5])}"
                        )
            except BookragError as exc:
                sb.error = str(exc)
                say(f"failed    {sb.slug}: {exc}")
            sb.seconds += time.perf_counter() - start
        ready = [sb for sb in todo if sb.error is None]
        pending = {
            sb.slug: texts_to_embed(
                markdown_of(settings, books[sb.slug]), settings.home, settings.max_chunk_tokens, embedder
            )
            for sb in ready
        }
        ready.sort(key=lambda sb: (len(pending[sb.slug]), sb.slug))  # the smallest first: searchable sooner
        everything = [t for texts in pending.values() for t in texts]
        rate = embedding_rate(embedder.passages, everything[:sample_size]) if everything else None
        say(f"{estimate_line(len(everything), rate)} ({_count(len(ready), 'book')})")
        bar = tqdm(total=len(everything), unit="chunk", desc="shelf", disable=not progress or not everything)
        try:
            for sb in ready:
                start = time.perf_counter()
                try:
                    stats = write_sidecars(
                        markdown_of(settings, books[sb.slug]),
                        settings.home,
                        settings.max_chunk_tokens,
                        embedder,
                        bar=bar,
                    )
                    sb.chunks = stats.chunks_embedded + stats.sentences_embedded
                    sb.load = load(conn, settings.home, [settings.corpus / sb.slug])
                    line = f"built     {sb.slug}: {stats.embedded()}; load {sb.load.line()}"
                except BookragError as exc:
                    sb.error = str(exc)
                    line = f"failed    {sb.slug}: {exc}"
                with tqdm.external_write_mode():  # a line above the bar, not through it
                    say(line)
                sb.seconds += time.perf_counter() - start
        finally:
            bar.close()
    finally:
        conn.close()
    failed = [sb.slug for sb in todo if sb.error]
    if failed:
        raise BookragError(
            f"{_count(len(failed), 'book')} not built ({', '.join(failed)}): see the lines above; "
            f"the {len(todo) - len(failed)} others are"
        )
    return todo
