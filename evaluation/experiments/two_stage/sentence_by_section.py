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

import interleave as il
from one_search import ONE, among, sections
from replay import replay
from stage_one import COLS, K

LAMBDAS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.1)
CANDIDATES = 50


def rescored(branch: list[dict], secs: dict[str, float], lam: float) -> list[dict]:
    ranked = sorted(
        branch, key=lambda r: (-(r["score"] + lam * secs.get(r["parent_source_file"], 0.0)), r["rank"])
    )
    return ranked[: 2 * K]


def main() -> None:
    names = [f"lambda {lam}" + (" (installed)" if lam == 0 else "") for lam in LAMBDAS]
    il.AFTER, il.EVERY = 1, 3

    def lists(conn, it, v: str) -> dict[str, list[dict]]:
        branch = conn.execute(
            f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {CANDIDATES}, %s) h ORDER BY h.rank",
            (v, it.book),
        ).fetchall()
        rows = conn.execute(ONE.format(cols=COLS), (it.question, v, 100, it.book, 100)).fetchall()
        listed, secs = among(rows, sections(rows)), sections(rows, keep=None)
        return {name: il.interleave(listed, rescored(branch, secs, lam)) for name, lam in zip(names, LAMBDAS)}

    replay(names, lists)


if __name__ == "__main__":
    main()
