"""How should two-stage find its sections? A replay of rag.search_two_stage's two stages with two
stage-1 variants, then the installed sentence interleave over each list:
  summary  (until migration 0012) the p_sections best level-1 summaries of a hybrid search over
           level 1 alone (k 50);
  joint    (migration 0012) a hybrid search over levels 0 and 1 together (k 100): a section is
           a summary's own file or a paragraph's parent, scored by its best row.
Stage 2 as installed: rag.search_hybrid over the level-0 rows whose parent is a kept section
(pool 100), paragraph scores min-max normalised, final = 0.7 x paragraph + 0.3 x section score.
Also the default and the two branches, on the same questions. Measured as
evaluation.tune_fusion measures (PIAF at paragraph level). Needs the books and PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/stage_one.py tune|heldout [PIAF_LIMIT]
(tuning half with 600 PIAF questions: about 1 min; held-out half, all of PIAF's: about 4 min.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
from interleave import interleave
from replay import replay

K, SECTIONS, WEIGHT = 10, 5, 0.3
COLS = (
    "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph, "
    "h.parent_source_file, h.score, h.rank"
)
STAGE_ONE = {
    "summary": "SELECT h.source_file AS f, max(h.score) AS best FROM rag.search_hybrid(%s, %s::vector, 50, %s, ARRAY[1], "
    "p_pool => 100, p_chapter_weight => 0) h GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %s",
    "joint": "SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS f, max(h.score) AS best "
    "FROM rag.search_hybrid(%s, %s::vector, 100, %s, ARRAY[0, 1], p_pool => 100, p_chapter_weight => 0) h "
    "WHERE CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END IS NOT NULL "
    "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %s",
}


def sections(conn, question: str, v: str, book: str, variant: str) -> dict[str, float]:
    rows = [r for r in conn.execute(STAGE_ONE[variant], (question, v, book, SECTIONS)).fetchall() if r["f"]]
    if not rows:
        return {}
    hi, lo = rows[0]["best"], rows[-1]["best"]
    return {r["f"]: (r["best"] - lo) / (hi - lo) if hi != lo else 1.0 for r in rows}


def stage_two(conn, question: str, v: str, book: str, secs: dict[str, float]) -> list[dict]:
    rows = conn.execute(
        f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, 100, %s, ARRAY[0], p_parent_files => %s, "
        "p_pool => 100, p_chapter_weight => 0) h",
        (question, v, book, list(secs)),
    ).fetchall()
    if not rows:
        return []
    hi, lo = max(r["score"] for r in rows), min(r["score"] for r in rows)
    for r in rows:
        r["final"] = (1 - WEIGHT) * ((r["score"] - lo) / (hi - lo) if hi != lo else 1.0) + WEIGHT * secs[
            r["parent_source_file"]
        ]
    return sorted(rows, key=lambda r: (-r["final"], r["rank"], r["id"]))[:K]


def main() -> None:
    names = ["bm25", "vector", "hybrid (default)"] + [
        f"two-stage, {v} stage 1{s}" for v in STAGE_ONE for s in ("", " + sentence branch")
    ]

    def lists(conn, it, v: str) -> dict[str, list[dict]]:
        out = {}
        for mode, name in (("bm25", "bm25"), ("vector", "vector"), ("hybrid", "hybrid (default)")):
            out[name] = conn.execute(
                f"SELECT {COLS} FROM rag.search(%s, %s::vector, %s, {K}, %s) h ORDER BY h.rank",
                (it.question, v, mode, it.book),
            ).fetchall()
        branch = conn.execute(
            f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K}, %s) h ORDER BY h.rank",
            (v, it.book),
        ).fetchall()
        for variant in STAGE_ONE:
            listed = stage_two(
                conn, it.question, v, it.book, sections(conn, it.question, v, it.book, variant)
            )
            out[f"two-stage, {variant} stage 1"] = listed
            out[f"two-stage, {variant} stage 1 + sentence branch"] = interleave(listed, branch)
        return out

    replay(names, lists)


if __name__ == "__main__":
    main()
