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

import interleave as il
from one_search import ONE, among, sections
from replay import replay
from stage_one import COLS, K

THRESHOLDS = (0, 8, 12, 16, 24)


def demoted(rows: list[dict], threshold: int) -> list[dict]:
    """The rows in their order, those under `threshold` tokens moved after the others."""
    return [r for r in rows if r["content_token_count"] >= threshold] + [
        r for r in rows if r["content_token_count"] < threshold
    ]


def main() -> None:
    names = [f"under {t} tokens last" if t else "installed" for t in THRESHOLDS]
    il.AFTER, il.EVERY = 1, 3

    def lists(conn, it, v: str) -> dict[str, list[dict]]:
        branch = conn.execute(
            f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K + 10}, %s) h ORDER BY h.rank",
            (v, it.book),
        ).fetchall()
        rows = conn.execute(ONE.format(cols=COLS), (it.question, v, 100, it.book, 100)).fetchall()
        ranked = among(rows, sections(rows), k=1000)  # more than K, so demoting can promote
        return {
            name: il.interleave(demoted(ranked, t)[:K], demoted(branch, t)[: 2 * K])
            for name, t in zip(names, THRESHOLDS)
        }

    replay(names, lists)


if __name__ == "__main__":
    main()
