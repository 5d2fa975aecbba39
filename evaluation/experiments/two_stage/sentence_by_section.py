"""Should two-stage's sentence branch prefer paragraphs of the sections stage 1 ranked well?
Installed (migration 0014's default), the branch is book-wide: places 2, 5, 8 go to the
paragraphs cited by the chapter-summary sentences nearest to the query, wherever they are. A
reworded question's gold paragraph is often cited by a sentence of the right chapter that is
not among the nearest book-wide (with the gold chapter as `within`, the branch ranks it first
far more often: within_chapter.py), while stage 1 ranks that chapter among its best. Here each
branch candidate (the paragraphs of rag.search_sentences' 50 best) is re-scored
    sentence similarity + lambda x its section's stage-1 score
(the section's best fused row among stage 1's 100 rows, min-max normalised over every section
found there, 0 for a section not found), and the interleave takes them in that order. lambda 0
is the installed branch. A replay in Python over rag.search_hybrid and rag.search_sentences
(stage 2 among stage 1's rows, as one_search.py; PIAF at paragraph level). Needs the books and
PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/sentence_by_section.py tune|heldout [PIAF_LIMIT]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
from psycopg.rows import dict_row

import interleave as il
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, headers_for, rows_for, spread, table
from one_search import ONE, among, section_of, sections
from stage_one import COLS, K

LAMBDAS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.1)
CANDIDATES = 50


def all_sections(rows: list[dict]) -> dict[str, float]:
    """Every section found among stage 1's rows (levels 0-1, best row each), min-max normalised."""
    best: dict[str, float] = {}
    for r in rows:
        s = section_of(r)
        if s and r["level"] <= 1 and (s not in best or r["score"] > best[s]):
            best[s] = r["score"]
    if not best:
        return {}
    hi, lo = max(best.values()), min(best.values())
    return {f: (b - lo) / (hi - lo) if hi != lo else 1.0 for f, b in best.items()}


def rescored(branch: list[dict], secs: dict[str, float], lam: float) -> list[dict]:
    ranked = sorted(branch, key=lambda r: (-(r["score"] + lam * secs.get(r["parent_source_file"], 0.0)), r["rank"]))
    return ranked[:2 * K]


def main() -> None:
    half = sys.argv[1] if len(sys.argv) > 1 else "tune"
    piaf_limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    home = load_settings().home
    names = [f"lambda {lam}" + (" (installed)" if lam == 0 else "") for lam in LAMBDAS]
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
                branch = conn.execute(f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {CANDIDATES}, %s) h "
                                      "ORDER BY h.rank", (v, it.book)).fetchall()
                rows = conn.execute(ONE.format(cols=COLS), (it.question, v, 100, it.book, 100)).fetchall()
                listed = among(rows, sections(rows))
                secs = all_sections(rows)
                for name, lam in zip(names, LAMBDAS):
                    scored[name].append(score_question(it, name, il.interleave(listed, rescored(branch, secs, lam))))
            for name, res in scored.items():
                results[name][set_name] = aggregate(res, [1, 5, 10])
    print(f"{half} half: " + ", ".join(f"{n} {int(a['questions'])} questions" for n, a in results[names[0]].items()) + "\n")
    print(table(headers_for(results), rows_for(results, names)))


if __name__ == "__main__":
    main()
