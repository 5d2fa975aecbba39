"""Does two-stage's first search need the kNN top 100, or does a smaller kNN pool rank as well?
The HNSW scan's cost follows its ef_search (the pool), and until migration 0017 both branches
read 100. Here rag.search_two_stage is installed with p_vector_pool defaulting to 100, 70, 50
and 40 in turn (committed, because bookrag.search ends a transaction after each search; the
file's own definition is installed again at the end, whatever happens) and the default search
(`auto`, with the sentence branch) is run through rag.search on one half of the three
evalsets, scored by evaluation.tune_fusion's runner (recall@5 and MRR@10; PIAF at paragraph
level). Each question searches inside its own book, so the general functions answer (the
generated default search serves calls without a book; generated_default.py checks it gives
the same rows). Needs the books and PIAF loaded. Decision 26.
    cd /work/main && .venv/bin/python evaluation/experiments/latency/vector_pool.py tune|heldout [--piaf-limit N] [--pools 100,40]
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bookrag import db
from bookrag.config import load_settings
from evaluation.tune_fusion import Runner, Setting, evaluate_settings, half_sets, headers_for, rows_for, table

FUNCTION = ROOT / "sql" / "functions" / "search_two_stage.sql"


def with_vector_pool(pool: int) -> str:
    """The installed function's text with another default kNN pool."""
    text, n = re.subn(r"p_vector_pool(\s+)INT DEFAULT \d+", rf"p_vector_pool\g<1>INT DEFAULT {pool}", FUNCTION.read_text())
    assert n == 1, "search_two_stage.sql no longer declares p_vector_pool INT DEFAULT <n>"
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    ap.add_argument("--pools", default="100,70,50,40")
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit)
    results = {}
    names = []
    with db.connect(db.database_url(settings)) as conn:
        runner = Runner(conn, progress=True)
        try:
            for pool in (int(p) for p in args.pools.split(",")):
                conn.execute(with_vector_pool(pool))
                conn.commit()
                conn.execute("DISCARD PLANS")  # the callers' cached plans hold the old default
                name = f"default, kNN pool {pool}"
                results.update(evaluate_settings(runner, sets, [Setting(name, "auto")]))
                names.append(name)
        finally:
            conn.rollback()
            conn.execute(FUNCTION.read_text())
            conn.commit()
    print(f"{args.half} half: " + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items()) + "\n")
    print(table(headers_for(results), rows_for(results, names)))


if __name__ == "__main__":
    main()
