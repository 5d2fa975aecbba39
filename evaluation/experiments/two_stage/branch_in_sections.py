"""Two-stage with the sentence branch restricted to the sections stage 1 kept. Stage 1 keeps the
gold chapter of most reworded questions (tuning halves, paraphrase questions: 6 of 8 Bastiat,
14 of 24 Tocqueville; section_sentences.py's probe), but stage 2 ranks the answer paragraph in
the top 5 for only 2 of those 6 and 2 of those 14. The installed merge takes the branch's
paragraphs from the whole book; here they come only from the kept sections (the branch's 300
nearest sentences' paragraphs, filtered, first 20), merged by the installed interleave (after
1, every 3), sentence-first (after 0, every 3) or denser (after 1, every 2). A replay of
rag.search_two_stage's stages (stage_one.py's "joint" stage 1 and its stage 2), scored as
evaluation.tune_fusion scores; books only (PIAF has no sentences).
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/branch_in_sections.py tune|heldout
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
import interleave as il
from psycopg.rows import dict_row
from stage_one import COLS, sections, stage_two

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, headers_for, rows_for, table

MERGES = {
    "installed (branch over the book)": (1, 3),
    "branch in the kept sections": (1, 3),
    "branch in the kept sections, first": (0, 3),
    "branch in the kept sections, every 2": (1, 2),
}


def main() -> None:
    half = sys.argv[1] if len(sys.argv) > 1 else "tune"
    home = load_settings().home
    results: dict[str, dict[str, dict[str, float]]] = {n: {} for n in MERGES}
    reworded: dict[str, dict[str, dict[str, float]]] = {n: {} for n in MERGES}  # paraphrase questions only
    with db.connect(db.database_url(load_settings())) as conn:
        conn.row_factory = dict_row
        for set_name in ("bastiat", "tocqueville"):
            items = [i for i in load_evalset(home / SETS[set_name]) if half_of(i.id) == half]
            scored: dict[str, list] = {n: [] for n in MERGES}
            for it in items:
                v = vector_literal(embed_query(conn, it.question))
                secs = sections(conn, it.question, v, it.book, "joint")
                listed = stage_two(conn, it.question, v, it.book, secs)
                book_branch = conn.execute(
                    f"SELECT {COLS} FROM rag.search_sentences(%s::vector, 20, %s) h ORDER BY h.rank",
                    (v, it.book),
                ).fetchall()
                wide = conn.execute(
                    f"SELECT {COLS} FROM rag.search_sentences(%s::vector, 300, %s) h ORDER BY h.rank",
                    (v, it.book),
                ).fetchall()
                inside = [h for h in wide if h["parent_source_file"] in secs][:20]
                for name, (after, every) in MERGES.items():
                    il.AFTER, il.EVERY = after, every
                    branch = book_branch if name.startswith("installed") else inside
                    scored[name].append(score_question(it, name, il.interleave(listed, branch)))
            for name, res in scored.items():
                results[name][set_name] = aggregate(res, [1, 5, 10])
                reworded[name][set_name] = aggregate([r for r in res if r.kind == "paraphrase"], [1, 5, 10])
    print(f"{half} half\n")
    print(table(headers_for(results), rows_for(results, list(MERGES))))
    print("\nparaphrase questions only\n")
    print(table(headers_for(reworded), rows_for(reworded, list(MERGES))))


if __name__ == "__main__":
    main()
