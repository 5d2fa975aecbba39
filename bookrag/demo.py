"""`bookrag demo`: the main job end to end on the embedded database."""

from __future__ import annotations

import time
from dataclasses import replace

import psycopg

from bookrag import db
from bookrag.ask import ask_phrasings, render_answer
from bookrag.cite import add_citations
from bookrag.config import Settings
from bookrag.links import citation_url
from bookrag.migrate import apply_migrations
from bookrag.search import SearchRequest, build_context, cited_rows, search_and_pack
from loader.check import check_corpus
from loader.embedding import get_embedder
from loader.importers import importer_for, prepared_by_default
from loader.load import load
from loader.manifest import all_books
from loader.sidecars import write_sidecars

QUESTIONS = [
    "Quelle est la thèse de la Pétition des fabricants de chandelles ?",
    "Pourquoi les peuples démocratiques préfèrent-ils l'égalité à la liberté ?",
]


def answer(conn: psycopg.Connection, settings: Settings, req: SearchRequest) -> str:
    """`ask`'s whole answer to req.query: with an LLM configured, the question is first rewritten in
    the author's own words (ask_phrasings; printed), searched with them (rag.search_phrasings) and
    the context packed from the fused hits; without one, the context of the question alone."""
    lines = []
    if settings.llm_model:
        listed = conn.execute("SELECT book, title, author, year FROM rag.list_books()").fetchall()
        books = [{"title": b[1], "author": b[2], "year": b[3]} for b in listed if req.book in (None, b[0])]
        wordings, why = ask_phrasings(req.query, books)
        lines += [f"Phrasings : {w}" for w in wordings] + ([f"({why})"] if why else []) + [""]
        if wordings:
            req = replace(req, phrasings=wordings)
    if req.phrasings:
        rows = search_and_pack(conn, req, None, None, req.k)[1] or []
    else:
        rows = build_context(conn, req)
    rows = add_citations(conn, rows)
    for r in rows:  # each passage's paragraph in the reading room (bookrag mcp --http)
        r["url"] = citation_url(settings.reading_room_url, r["source_file"], r.get("paragraph"))
    return "\n".join([*lines, render_answer(req.query, rows, cited_rows(conn, rows))])


def run_demo(settings: Settings, questions: list[str] | None = None) -> None:
    t0 = time.perf_counter()
    if (
        settings.sources is not None
    ):  # a wrong folder is named before any work; unset, the books are downloaded
        settings.require_sources()
    books = [b for b in all_books(settings.corpus) if prepared_by_default(b)]
    for book in books:
        n = len(importer_for(book).prepare(settings, book).files)
        print(f"prepare  {book.slug}: {n} source files")
    problems, line = check_corpus(settings, [b.slug for b in books])
    print(f"check    {line}")
    for p in problems[:10]:
        print(f"  {p}")
    mds = sorted(p for b in books for p in (settings.corpus / b.slug).rglob("*.md"))
    embedder = get_embedder(settings.embedder, settings.embedding_model)
    stats = write_sidecars(mds, settings.home, settings.max_chunk_tokens, embedder)
    print(f"sidecars {stats.written} written, {stats.unchanged} unchanged, {stats.embedded()}")
    url = db.database_url(settings)
    apply_migrations(url)
    conn = db.connect(url)
    try:
        report = load(conn, settings.home, [settings.corpus / b.slug for b in books])
        print(f"load     {report.line()}")
        print(f"ready in {time.perf_counter() - t0:.1f} s\n")
        for q in questions or QUESTIONS:
            print(answer(conn, settings, SearchRequest(q, k=6, expand_parent=True, budget=2500)))
            print()
    finally:
        conn.close()
