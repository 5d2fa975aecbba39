"""Do very short paragraphs crowd two-stage's list? The paragraph vectors embed the heading path
with the text (DESIGN: the largest single gain of the vector branch), so a paragraph of a few
words ("À MM. les membres de la chambre des députés.", "«MESSIEURS,") is mostly its chapter's
title: a question naming the chapter finds it near the top, above the paragraphs that carry
the chapter's claims (the demo's first question lists two such lines). Bastiat has 126
paragraph chunks under 10 tokens and 418 under 20 (dialogue lines among them), Tocqueville 5
and 66. Here two-stage's list (replayed as one_search.py, with the installed interleave of the
sentence branch) moves the chunks under T tokens after the others, in both lists, for several
T (0 = installed). Needs the books and PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/short_paragraphs.py tune|heldout [PIAF_LIMIT]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
from psycopg.rows import dict_row

import interleave as il
import one_search
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, headers_for, rows_for, spread, table
from one_search import ONE, among, sections
from stage_one import COLS, K

THRESHOLDS = (0, 8, 12, 16, 24)


def demoted(rows: list[dict], threshold: int) -> list[dict]:
    """The rows in their order, those under `threshold` tokens moved after the others."""
    return [r for r in rows if r["content_token_count"] >= threshold] + [r for r in rows if r["content_token_count"] < threshold]


def among_all(rows: list[dict], secs: dict[str, float]) -> list[dict]:
    """one_search.among without its cut at K: every kept-section paragraph among the rows, ranked."""
    saved, one_search.K = one_search.K, 1000
    try:
        return among(rows, secs)
    finally:
        one_search.K = saved


def main() -> None:
    half = sys.argv[1] if len(sys.argv) > 1 else "tune"
    piaf_limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    home = load_settings().home
    names = [f"under {t} tokens last" if t else "installed" for t in THRESHOLDS]
    results: dict[str, dict[str, dict[str, float]]] = {n: {} for n in names}
    il.AFTER, il.EVERY = 1, 3
    with db.connect(db.database_url(load_settings())) as conn:
        conn.row_factory = dict_row
        for set_name, path in SETS.items():
            items = [i for i in load_evalset(home / path) if half_of(i.id) == half]
            if set_name == "piaf":
                items = spread(items, piaf_limit)
            scored: dict[str, list] = {n: [] for n in names}
            for it in items:
                v = vector_literal(embed_query(conn, it.question))
                branch = conn.execute(f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K + 10}, %s) h "
                                      "ORDER BY h.rank", (v, it.book)).fetchall()
                rows = conn.execute(ONE.format(cols=COLS), (it.question, v, 100, it.book, 100)).fetchall()
                secs = sections(rows)
                for name, t in zip(names, THRESHOLDS):
                    # stage 2 ranks the kept sections' paragraphs; take more than K so demoting can promote
                    listed = demoted(among_all(rows, secs), t)[:K]
                    scored[name].append(score_question(it, name, il.interleave(listed, demoted(branch, t)[:2 * K])))
            for name, res in scored.items():
                results[name][set_name] = aggregate(res, [1, 5, 10])
    print(f"{half} half: " + ", ".join(f"{n} {int(a['questions'])} questions" for n, a in results[names[0]].items()) + "\n")
    print(table(headers_for(results), rows_for(results, names)))


if __name__ == "__main__":
    main()
