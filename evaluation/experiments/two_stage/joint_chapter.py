"""Can the default hybrid take two-stage's section score softly? Two-stage scores a section by
the best fused row among its summary and its paragraphs (migration 0012) and keeps the 5 best;
the default lifts a paragraph by its chapter *summary's* fused score alone (chapter_weight 0.4,
decision 11). Here the default's candidates (rag.search_hybrid, k 80, no chapter term) are
re-ranked with the section score instead: a paragraph's final = (1 - w) x fused + w x the best
fused score of its section's candidate rows (summary or paragraphs); optionally the summaries
too. Then the installed sentence interleave (after 1, every 3). Ties: best branch rank, then id.
Scored as evaluation.tune_fusion scores (PIAF at paragraph level); "installed" is
rag.search_hybrid with its defaults, merged the same way.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/joint_chapter.py tune|heldout [PIAF_LIMIT]
(measured with PIAF_LIMIT 600 on the tuning half)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))

import interleave as il
from one_search import section_of
from replay import replay

COLS = (
    "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph, "
    "h.parent_source_file, h.score, h.rank, h.bm25_rank, h.vector_rank"
)
WS = (0.2, 0.3, 0.4, 0.5)


def rerank(cands: list[dict], w: float, summaries_too: bool) -> list[dict]:
    """The candidates re-scored with their section's best fused score (raw, not normalised)."""
    best: dict[str, float] = {}
    for r in cands:
        s = section_of(r)
        if s and r["level"] <= 1:
            best[s] = max(best.get(s, -1e9), r["score"])
    out = []
    for r in cands:
        r = dict(r)
        lifted = (r["level"] == 0 and section_of(r) in best) or (summaries_too and r["level"] == 1)
        r["final"] = (1 - w) * r["score"] + w * best[section_of(r)] if lifted else r["score"]
        out.append(r)
    return sorted(
        out,
        key=lambda r: (
            -r["final"],
            min(x for x in (r["bm25_rank"], r["vector_rank"]) if x is not None),
            r["id"],
        ),
    )[:10]


def main() -> None:
    names = ["installed"] + [f"joint w={w}" for w in WS] + [f"joint w={w}, summaries too" for w in (0.3, 0.4)]
    il.AFTER, il.EVERY = 1, 3

    def lists(conn, it, v: str) -> dict[str, list[dict]]:
        branch = conn.execute(
            f"SELECT {COLS} FROM rag.search_sentences(%s::vector, 20, %s) h ORDER BY h.rank", (v, it.book)
        ).fetchall()
        inst = conn.execute(
            f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, 10, %s) h ORDER BY h.rank",
            (it.question, v, it.book),
        ).fetchall()
        cands = conn.execute(
            f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, 80, %s, p_chapter_weight => 0) h "
            "ORDER BY h.rank",
            (it.question, v, it.book),
        ).fetchall()
        out = {"installed": il.interleave(inst, branch)}
        for w in WS:
            out[f"joint w={w}"] = il.interleave(rerank(cands, w, False), branch)
        for w in (0.3, 0.4):
            out[f"joint w={w}, summaries too"] = il.interleave(rerank(cands, w, True), branch)
        return out

    replay(names, lists)


if __name__ == "__main__":
    main()
