"""Can two-stage read both stages from one hybrid search? Migration 0012's rag.search_two_stage
ran two: stage 1 over levels 0-1 (k 100) to find the sections, stage 2 inside the kept sections
(pool 100) to rank their paragraphs. Here stage 2 ranks instead the kept sections' paragraphs
among stage 1's own rows (min-max over them, then 0.7 x paragraph + 0.3 x section, as
installed), for stage-1 reads of 100, 60 and 40 rows over every level (rows of levels 2-3 left
out: the same figures as a levels 0-1 filter, which costs the BM25 scan about 1 ms). Then the
installed sentence interleave (after 1, every 3) over each list. A replay in Python over
rag.search_hybrid and rag.search_sentences, scored as evaluation.tune_fusion scores (PIAF at
paragraph level). Needs the books and PIAF loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/one_search.py tune|heldout [PIAF_LIMIT]
(tuning half with 600 PIAF questions: about 1 min; held-out half, all of PIAF's: about 5 min.)
Adopted with 100 rows (migration 0013, decision 22).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
import interleave as il
from replay import replay
from stage_one import COLS, SECTIONS, WEIGHT, K, stage_two

READS = (100, 60, 40)
ONE = "SELECT {cols} FROM rag.search_hybrid(%s, %s::vector, %s, %s, p_pool => %s, p_chapter_weight => 0) h ORDER BY h.rank"
TWO_STAGE_ONE = (
    "SELECT {cols} FROM rag.search_hybrid(%s, %s::vector, 100, %s, ARRAY[0, 1], p_pool => 100, "
    "p_chapter_weight => 0) h ORDER BY h.rank"
)


def section_of(r: dict) -> str | None:
    return r["source_file"] if r["level"] == 1 else r["parent_source_file"]


def sections(rows: list[dict], keep: int | None = SECTIONS) -> dict[str, float]:
    """The `keep` best sections of stage-1 rows (best row each; None: every one), min-max normalised."""
    best: dict[str, float] = {}
    for r in rows:
        s = section_of(r)
        if s and r["level"] <= 1 and (s not in best or r["score"] > best[s]):
            best[s] = r["score"]
    top = sorted(best.items(), key=lambda t: (-t[1], t[0]))[:keep]
    if not top:
        return {}
    hi, lo = top[0][1], top[-1][1]
    return {f: (b - lo) / (hi - lo) if hi != lo else 1.0 for f, b in top}


def among(rows: list[dict], secs: dict[str, float], k: int = K) -> list[dict]:
    """Stage 2 over stage 1's rows: the kept sections' k best paragraphs, scored as installed."""
    c = [dict(r) for r in rows if r["level"] == 0 and r["parent_source_file"] in secs]
    if not c:
        return []
    hi, lo = max(r["score"] for r in c), min(r["score"] for r in c)
    for r in c:
        norm = (r["score"] - lo) / (hi - lo) if hi != lo else 1.0
        r["final"] = (1 - WEIGHT) * norm + WEIGHT * secs[r["parent_source_file"]]
    return sorted(c, key=lambda r: (-r["final"], r["rank"], r["id"]))[:k]


def main() -> None:
    names = ["two searches (migration 0012)"] + [f"one search, {n} rows" for n in READS]
    names += ["two searches, sections only", "one search, 100 rows, sections only"]
    il.AFTER, il.EVERY = 1, 3

    def lists(conn, it, v: str) -> dict[str, list[dict]]:
        branch = conn.execute(
            f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K}, %s) h ORDER BY h.rank",
            (v, it.book),
        ).fetchall()
        secs = sections(conn.execute(TWO_STAGE_ONE.format(cols=COLS), (it.question, v, it.book)).fetchall())
        alone = {
            "two searches (migration 0012)": stage_two(conn, it.question, v, it.book, secs) if secs else []
        }
        for n in READS:
            rows = conn.execute(ONE.format(cols=COLS), (it.question, v, n, it.book, n)).fetchall()
            alone[f"one search, {n} rows"] = among(rows, sections(rows))
        out = {name: il.interleave(listed, branch) for name, listed in alone.items()}
        out["two searches, sections only"] = alone["two searches (migration 0012)"]
        out["one search, 100 rows, sections only"] = alone["one search, 100 rows"]
        return out

    replay(names, lists)


if __name__ == "__main__":
    main()
