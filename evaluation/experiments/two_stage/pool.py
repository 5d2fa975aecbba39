"""Can two-stage search at the default's cost? Its one hybrid search read p_pool candidates per
branch (100 since migration 0013) where hybrid search reads 40: the HNSW scan's ef_search and
the BM25 top-N follow the pool, so the pool is most of two-stage's extra time. Here
rag.search_two_stage is installed with p_pool 100, 60 and 40 in turn (committed, because
bookrag.search ends a transaction after each search; the file's own definition is installed
again at the end, whatever happens) and two-stage is run through rag.search as installed (with
the sentence branch), beside hybrid and the two branches, on one half of the three evalsets,
scored by evaluation.tune_fusion's runner (recall@5 and MRR@10; PIAF at paragraph level). Each
question searches inside its own book, so the general functions answer (generated_default.py
checks that the generated default search gives their rows).
Since migration 0017 p_pool is the BM25 pool only (and both branches' in the second search):
the kNN branch of the first search reads p_vector_pool (40), which --parameter p_vector_pool
varies instead (decision 26). The runs of the experiments README that varied both branches at
once (before 0017) are therefore not what --parameter p_pool measures today.
Needs the books and PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/pool.py tune|heldout [--piaf-limit N]
        [--parameter p_pool|p_vector_pool] [--pools 100,60,40]
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bookrag import db
from bookrag.config import load_settings
from evaluation.tune_fusion import (
    BRANCHES,
    Runner,
    Setting,
    evaluate_settings,
    half_sets,
    headers_for,
    rows_for,
    table,
)

POOLS = "100,60,40"
FUNCTION = ROOT / "sql" / "functions" / "search_two_stage.sql"


def with_pool(pool: int, parameter: str = "p_pool") -> str:
    """The installed function's text with another default for one of its pools."""
    text, n = re.subn(
        rf"\b{parameter}(\s+)INT DEFAULT \d+", rf"{parameter}\g<1>INT DEFAULT {pool}", FUNCTION.read_text()
    )
    assert n == 1, f"search_two_stage.sql no longer declares {parameter} INT DEFAULT <n>"
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    ap.add_argument("--parameter", choices=("p_pool", "p_vector_pool"), default="p_pool")
    ap.add_argument("--pools", default=POOLS, help="comma-separated values (default %(default)s)")
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit)
    results = {}
    names = []
    with db.connect(db.database_url(settings)) as conn:
        runner = Runner(conn, progress=False)
        results.update(evaluate_settings(runner, sets, [*BRANCHES, Setting("hybrid")]))
        names += [s.name for s in BRANCHES] + ["hybrid"]
        try:
            for pool in (int(p) for p in args.pools.split(",")):
                conn.execute(with_pool(pool, args.parameter))
                conn.commit()
                conn.execute("DISCARD PLANS")  # the callers' cached plans hold the old default
                name = f"two-stage {args.parameter} {pool}"
                results.update(evaluate_settings(runner, sets, [Setting(name, "two-stage")]))
                names.append(name)
        finally:
            conn.rollback()
            conn.execute(FUNCTION.read_text())
            conn.commit()
    print(
        f"{args.half} half: " + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items()) + "\n"
    )
    print(table(headers_for(results), rows_for(results, names)))


if __name__ == "__main__":
    main()
