"""Can two-stage's second search skip its BM25 query? When the first search's rows hold fewer
than k paragraphs of the kept sections, rag._search_in_sections ranked the sections' paragraphs
with a pg_search query filtered to them (4-5 ms at 100k synthetic rows, where it runs on almost
every query: issue 10's latency bound) and the exact kNN inside them. Since migration 0019
(decision 28) its BM25 branch is the rows the first search already read instead: the level-0
rows of the kept sections among the first search's rows that have a BM25 score (their pg_search
score), so a paragraph of a kept section outside those rows gets the BM25 floor; the kNN branch
and the fusion are unchanged.

This runs two-stage as installed beside two-stage as it was until 0019: rag._search_in_sections
as migration 0016 created it (installed for the run as rag._search_in_sections_0016) and
rag.search_two_stage as migration 0017 left it, calling that one; both texts are read from the
migration files, which never change. They replace the installed functions for the run
(committed, because bookrag.search ends a transaction after each search) and the files'
definitions are put back at the end, whatever happens. Two-stage runs through rag.search (with
the sentence branch) on one half of the three evalsets, scored by evaluation.tune_fusion's
runner (recall@5 and MRR@10; PIAF at paragraph level). Each question searches inside its own
book, so the general functions answer. "second search ran" counts the questions whose second
search ran (pg_stat_user_functions' calls of rag._search_in_sections in the installed run).
Needs the books and PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/second_bm25.py tune|heldout [--piaf-limit N]
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from bookrag import db
from bookrag.config import load_settings
from bookrag.functions import FUNCTIONS_DIR, recorded_texts
from evaluation.tune_fusion import Runner, Setting, evaluate_settings, half_sets, headers_for, rows_for, table

INSTALLED, OLD = "two-stage (0019: the first search's BM25 rows)", "two-stage until 0019 (a pg_search query)"


def until_0019() -> str:
    fn = recorded_texts(until="0016")["_search_in_sections"]
    two = recorded_texts(until="0017")["search_two_stage"]
    for old, new, text in (
        ("rag._search_in_sections(", "rag._search_in_sections_0016(", fn),
        ("FROM rag._search_in_sections(", "FROM rag._search_in_sections_0016(", two),
    ):
        assert text.count(old) == 1, old
    return (
        fn.replace("rag._search_in_sections(", "rag._search_in_sections_0016(")
        + "\n"
        + two.replace("FROM rag._search_in_sections(", "FROM rag._search_in_sections_0016(")
    )


def calls(conn) -> int:
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.commit()  # the session's counts are sent when it goes idle
    time.sleep(0.2)
    with db.connect(conn.info.dsn, autocommit=True) as other:
        row = other.execute(
            "SELECT calls FROM pg_stat_user_functions WHERE schemaname = 'rag' "
            "AND funcname = '_search_in_sections'"
        ).fetchone()
    return row[0] if row else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit)
    results = {}
    second = {}
    with db.connect(db.database_url(settings)) as conn:
        conn.execute("SET track_functions = 'all'")
        conn.commit()
        runner = Runner(conn, progress=False)
        for name, items in sets.items():
            before = calls(conn)
            results.setdefault(INSTALLED, {}).update(
                evaluate_settings(runner, {name: items}, [Setting(INSTALLED, "two-stage")])[INSTALLED]
            )
            second[name] = calls(conn) - before
        try:
            conn.execute(until_0019())
            conn.commit()
            conn.execute("DISCARD PLANS")
            results.update(evaluate_settings(runner, sets, [Setting(OLD, "two-stage")]))
        finally:
            conn.rollback()
            conn.execute("DROP FUNCTION IF EXISTS rag._search_in_sections_0016")
            conn.execute((FUNCTIONS_DIR / "search_two_stage.sql").read_text())
            conn.commit()
    print(f"{args.half} half: " + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items()))
    print("second search ran (k 10): " + ", ".join(f"{n} {c}" for n, c in second.items()) + "\n")
    print(table(headers_for(results), rows_for(results, [OLD, INSTALLED])))


if __name__ == "__main__":
    main()
