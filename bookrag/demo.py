"""`bookrag demo`: the main job end to end on the embedded database."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import psycopg

from bookrag import db
from bookrag.ask import Cited, answer_with_llm, ask_phrasings, mend_with_llm, numbered_sources, render_answer
from bookrag.cite import add_citations
from bookrag.config import Settings
from bookrag.errors import BookragError
from bookrag.links import citation_url
from bookrag.migrate import apply_migrations
from bookrag.quotes import check_claims, mark, parse_answer, problem, scholarly_prefixes
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
    cited = cited_rows(conn, rows)
    written = checked_answer(conn, settings, req.query, rows, cited) if settings.llm_model and rows else None
    return "\n".join([*lines, render_answer(req.query, rows, cited, written)])


def checked_answer(
    conn: psycopg.Connection, settings: Settings, question: str, rows: list[dict[str, Any]], cited: Cited
) -> str:
    """The LLM's answer with its quotes checked against the book (bookrag.quotes): what fails is sent
    back once to be mended, what still fails is marked in the text, and a last line says how many
    quotes are exact."""
    numbered = {n: (r["source_file"], r.get("paragraph")) for n, r in numbered_sources(rows)}
    prefixes = scholarly_prefixes(conn)
    text = answer_with_llm(question, rows, cited)
    mended = 0
    try:
        claims = parse_answer(text, prefixes, numbered)
        results = check_claims(conn, claims, settings.reading_room_url) if claims else []
        wrong = [r for r in results if r.verdict != "exact"]
        if wrong:
            text = mend_with_llm(question, rows, cited, text, [problem(r, numbered) for r in wrong])
            claims = parse_answer(text, prefixes, numbered)
            results = check_claims(conn, claims, settings.reading_room_url) if claims else []
            mended = len(wrong)
            text = mark(text, claims, results)
    except BookragError as exc:  # e.g. a quotation mark the LLM opened and never closed
        return f"{text}\n\n(Quotes not checked: {exc}.)"
    if not results:
        return text
    exact = sum(r.verdict == "exact" for r in results)
    note = f" after one mending of {mended}" if mended else ""
    return f"{text}\n\n(Quotes checked against the book{note}: {exact} of {len(results)} exact.)"


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
