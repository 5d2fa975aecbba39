"""Can the summary sentences help two-stage find its sections? Stage 1 of rag.search_two_stage
scores a section by the best fused row among its summary and paragraphs (migration 0012). A
probe of vector signals alone (chapter recall@5 on the paraphrase questions, full sets: a
chapter's best summary sentence + its summary + its best paragraph 0.74 / 0.69, against the
default search's 0.58 / 0.52) says the sentences rank chapters for reworded questions better.
Variant tried here: section score = (1 - w) x the installed stage-1 score + w x the section's
best sentence similarity, each min-max normalised over its own sections (a section missing from
one list gets 0 there); the sentences ranked exactly within the question's book. w = 0 is the
installed function. The variant replaces rag.search_two_stage for the run (the search path
ends each search's transaction, so it is committed) and the installed definition
(sql/functions/search_two_stage.sql) is put back at the end, also on error; the weight comes
from the setting bookrag_exp.sentence_weight. Measured as evaluation.tune_fusion measures, mode two-stage with
the installed sentence places. PIAF has no sentences, so w changes nothing there.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/section_sentences.py tune|heldout [--piaf-limit N] [--weights 0,0.3,0.5]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from evaluation.tune_fusion import Runner, Setting, evaluate_settings, half_sets, headers_for, rows_for, table

FUNCTION = Path(__file__).resolve().parents[3] / "sql/functions/search_two_stage.sql"
OLD_STAGE_ONE = """            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score"""
NEW_STAGE_ONE = """            SELECT c.section AS source_file, c.best FROM (
            WITH hs AS (
            SELECT h.section, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score"""
OLD_GROUP = """            GROUP BY h.section
            ORDER BY best DESC, h.section"""
NEW_GROUP = """            GROUP BY h.section
            ), ss AS (
            SELECT st.source_file AS section, max(1 - (st.embedding <=> p_query_embedding)) AS best
            FROM rag.sentences st
            WHERE p_query_embedding IS NOT NULL AND (p_book IS NULL OR st.book = p_book)
            GROUP BY st.source_file
            ), hn AS (
            SELECT section, coalesce((best - min(best) OVER ()) / nullif(max(best) OVER () - min(best) OVER (), 0), 1) AS x FROM hs
            ), sn AS (
            SELECT section, coalesce((best - min(best) OVER ()) / nullif(max(best) OVER () - min(best) OVER (), 0), 1) AS x FROM ss
            )
            SELECT coalesce(hn.section, sn.section) AS section,
                   (1 - current_setting('bookrag_exp.sentence_weight')::float8) * coalesce(hn.x, 0)
                   + current_setting('bookrag_exp.sentence_weight')::float8 * coalesce(sn.x, 0) AS best
            FROM hn FULL JOIN sn ON sn.section = hn.section
            ) c
            ORDER BY c.best DESC, c.section"""


def variant() -> str:
    sql = FUNCTION.read_text()
    for old, new in ((OLD_STAGE_ONE, NEW_STAGE_ONE), (OLD_GROUP, NEW_GROUP)):
        if old not in sql:
            sys.exit(f"{FUNCTION}: stage 1 is not the one this experiment rewrites")
        sql = sql.replace(old, new, 1)
    return sql


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    ap.add_argument("--weights", default="0,0.2,0.35,0.5,0.65,0.8")
    ap.add_argument("--sets", default="bastiat,tocqueville,piaf")
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit, tuple(args.sets.split(",")))
    results = {}
    with db.connect(db.database_url(settings)) as conn:
        conn.execute(variant())
        conn.commit()
        try:
            runner = Runner(conn, progress=False)
            for w in (float(x) for x in args.weights.split(",")):
                conn.execute("SELECT set_config('bookrag_exp.sentence_weight', %s, false)", (str(w),))
                conn.commit()
                results.update(
                    evaluate_settings(runner, sets, [Setting(f"two-stage, sentence weight {w}", "two-stage")])
                )
        finally:
            conn.rollback()
            conn.execute(FUNCTION.read_text())
            conn.commit()
    print(
        f"{args.half} half: " + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items()) + "\n"
    )
    print(table(headers_for(results), rows_for(results, list(results))))


if __name__ == "__main__":
    main()
