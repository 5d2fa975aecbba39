"""The lock convoy of issue 13: a reader transaction left open while the BM25 index is merged
after a load. Measures how long searches issued during the merge take, with the old plain
REINDEX and with REINDEX CONCURRENTLY (what the loader runs now).

Prerequisites: `bookrag load` has loaded the books into the embedded database (or DATABASE_URL).
Run: .venv/bin/python bench/bench_convoy.py [--hold 3] [--json out.json]
It works on a copy of the corpus table in a scratch database, dropped at the end.
"""

from __future__ import annotations

import argparse
import threading
import time

import psycopg
from common import FRENCH_QUERIES, load_note, machine, markdown_table, percentiles, write_json

from bookrag import db
from bookrag.config import load_settings
from evaluation.scratch import scratch_database


def copy_corpus(url: str, target: str) -> None:
    """The corpus rows copied into the scratch database in 20 COPYs: the segments a load leaves
    behind, which the merge folds into one."""
    cols = "level, parent_source_file, node_type, source_file, source_file_hash, chunk_index, heading_path, content, content_token_count"
    with psycopg.connect(url) as src, psycopg.connect(target) as dst:
        dst.execute(
            "INSERT INTO rag.books (book, title) SELECT book, title FROM (VALUES ('b', 'b')) v(book, title)"
        )
        rows = src.execute(f"SELECT {cols} FROM rag.hierarchical_content_nodes").fetchall()
        for i in range(20):
            with dst.cursor().copy(f"COPY rag.hierarchical_content_nodes ({cols}) FROM STDIN") as cp:
                for r in rows[i::20]:
                    cp.write_row(r)
        dst.commit()


def run(url: str, statement: str, hold_s: float) -> dict:
    idle = psycopg.connect(url)
    idle.execute(
        "SELECT count(*) FROM rag.search('pain', p_mode => 'bm25', p_k => 5)"
    ).fetchone()  # a reader left in a transaction
    merge_s: list[float] = []

    def merge() -> None:
        t = time.perf_counter()
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(statement)
        merge_s.append(time.perf_counter() - t)

    th = threading.Thread(target=merge)
    th.start()
    time.sleep(0.2)
    samples: list[float] = []
    with psycopg.connect(url, autocommit=True) as s:
        s.execute("SET statement_timeout = '30s'")
        end = time.monotonic() + hold_s
        releaser = threading.Timer(hold_s, idle.rollback)
        releaser.start()
        i = 0
        while time.monotonic() < end + 0.5 or th.is_alive():
            t = time.perf_counter()
            s.execute(
                "SELECT count(*) FROM rag.search(%s, p_mode => 'bm25', p_k => 10)",
                (FRENCH_QUERIES[i % len(FRENCH_QUERIES)],),
            ).fetchone()
            samples.append(time.perf_counter() - t)
            i += 1
            if i > 10_000:
                break
    th.join()
    idle.close()
    return {"statement": statement, "merge_s": merge_s[0], **percentiles(samples)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold", type=float, default=3.0, help="seconds the reader transaction stays open")
    ap.add_argument("--json")
    args = ap.parse_args()
    start = machine()
    settings = load_settings()
    with scratch_database(settings, "convoy") as url:
        copy_corpus(db.database_url(settings), url)
        results = [
            run(url, stmt, args.hold)
            for stmt in ("REINDEX INDEX rag.hcn_bm25_idx", "REINDEX INDEX CONCURRENTLY rag.hcn_bm25_idx")
        ]
    print(
        f"A reader transaction held open {args.hold:.0f} s while the BM25 index is merged; searches meanwhile:\n"
    )
    print(
        markdown_table(
            ["merge statement", "merge took (s)", "searches", "p50 ms", "p95 ms", "max ms"],
            [[r["statement"], r["merge_s"], r["n"], r["p50_ms"], r["p95_ms"], r["max_ms"]] for r in results],
        )
    )
    print("\n" + load_note(start))
    write_json(args.json, {"machine": start, "hold_s": args.hold, "results": results})


if __name__ == "__main__":
    main()
