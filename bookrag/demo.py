"""`bookrag demo`: the main job end to end on the embedded database."""

from __future__ import annotations

import time

from bookrag import db
from bookrag.ask import render_answer
from bookrag.cite import add_citations
from bookrag.config import Settings
from bookrag.migrate import apply_migrations
from bookrag.search import SearchRequest, build_context, cited_rows
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


def run_demo(settings: Settings, questions: list[str] | None = None) -> None:
    t0 = time.perf_counter()
    if settings.sources is not None:  # a wrong folder is named before any work; unset, the books are downloaded
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
            rows = add_citations(conn, build_context(conn, SearchRequest(q, k=6, expand_parent=True, budget=2500)))
            print(render_answer(q, rows, cited_rows(conn, rows)))
            print()
    finally:
        conn.close()
