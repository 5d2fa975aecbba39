"""Where the generated default search spends its time, server side: the corpus model's
rag._default_search (the generated search; per model, rag._default_search_<hash>, until migration 0020) copied into a scratch schema `probe` with a clock_timestamp() mark
before each step (RAISE NOTICE), called --calls times over 20 French queries (k 10) after 40
warm-up calls; the median of each step printed, in ms. The schema is dropped at the end.
With --synthetic N it runs in a scratch database holding bench/bench_search.py's synthetic
corpus of N rows and its queries (the same seed, so the same rows and queries as
`bench_search.py --sizes N`; about 2.5 min to build at 100k rows), dropped afterwards.
    cd /work/main && .venv/bin/python evaluation/experiments/latency/inside.py [--calls 160] [--synthetic 100000]
"""

import argparse
import statistics
import sys
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from common import FRENCH_QUERIES  # noqa: E402

from bookrag import db  # noqa: E402
from bookrag.config import load_settings  # noqa: E402
from bookrag.search import embed_query, vector_literal  # noqa: E402
from evaluation.scratch import scratch_database  # noqa: E402

STEPS = (
    ("    WITH b AS (", "checks and settings"),
    ("    IF v_files IS NULL THEN", "BM25 and kNN, fusion, both stages, the k rows"),
    ("    PERFORM rag._set_hnsw(2 * p_k);", "second search (when it runs)"),
    ("    RETURN QUERY SELECT * FROM rag._interleave", "sentence kNN and paragraphs"),
)  # one statement since 0018


def synthetic(url: str, size: int) -> list[tuple[str, object]]:
    """Builds bench_search.py's synthetic corpus of `size` rows in the database at `url` and
    returns its queries, drawn as that script draws them (same seed and order)."""
    import bench_search as bs  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(42)
    words, freq = bs.vocabulary(db.database_url(load_settings()), 4000, rng)
    bs.build_corpus(url, size, words, freq, rng, "1GB")
    return bs.synthetic_queries(words, 20, rng)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=160)
    ap.add_argument("--synthetic", type=int, metavar="N", help="bench_search.py's synthetic corpus of N rows")
    args = ap.parse_args()
    with ExitStack() as stack:
        if args.synthetic:
            url = stack.enter_context(scratch_database(load_settings(), "inside"))
            params = synthetic(url, args.synthetic)
        else:
            url, params = db.database_url(load_settings()), None
        probe(url, params, args.calls)


def probe(url: str, params: list | None, calls: int) -> None:
    with db.connect(url, autocommit=True) as conn:
        name = "_default_search"
        text = conn.execute(
            "SELECT pg_get_functiondef(%s::regprocedure)", (f"rag.{name}(text,vector,integer)",)
        ).fetchone()[0]
        text = text.replace(f"FUNCTION rag.{name}(", "FUNCTION probe.timed(", 1)
        text = text.replace("BEGIN\n", "BEGIN\n    t0 := clock_timestamp();\n", 1).replace(
            "DECLARE\n", "DECLARE\n    t0 timestamptz;\n", 1
        )
        for anchor, label in STEPS:
            assert anchor in text, anchor
            text = text.replace(
                anchor,
                f"    RAISE NOTICE '{label}|%', extract(epoch from clock_timestamp() - t0) * 1000; "
                "t0 := clock_timestamp();\n" + anchor,
                1,
            )
        end = text.rindex("END\n")
        text = (
            text[:end]
            + "    RAISE NOTICE 'merge|%', extract(epoch from clock_timestamp() - t0) * 1000;\n"
            + text[end:]
        )
        conn.execute("CREATE SCHEMA IF NOT EXISTS probe")
        try:
            conn.execute(text)
            marks: dict[str, list[float]] = defaultdict(list)

            def mark(d) -> None:
                label, _, ms = d.message_primary.partition("|")
                if ms:
                    marks[label].append(float(ms))

            conn.add_notice_handler(mark)
            if params is None:
                params = [(q, vector_literal(embed_query(conn, q))) for q in FRENCH_QUERIES[:20]]
            for i in range(40 + calls):
                if i == 40:
                    marks.clear()
                conn.execute("SELECT * FROM probe.timed(%s, %s, 10)", params[i % len(params)]).fetchall()
        finally:
            conn.execute("DROP SCHEMA IF EXISTS probe CASCADE")
    print(f"{calls} calls, 20 queries, k 10; median ms per step inside {name}\n")
    for label, values in marks.items():
        print(f"{label:40s} {statistics.median(values):6.3f}")
    print(f"{'sum':40s} {sum(statistics.median(v) for v in marks.values()):6.3f}")


if __name__ == "__main__":
    main()
