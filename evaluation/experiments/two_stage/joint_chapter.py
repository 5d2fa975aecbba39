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
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
from psycopg.rows import dict_row
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, headers_for, rows_for, table, spread
import interleave as il
HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"; PIAF_LIMIT = int(sys.argv[2]) if len(sys.argv) > 2 else 600
COLS = ("h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph, "
        "h.parent_source_file, h.score, h.rank, h.bm25_rank, h.vector_rank")
home = load_settings().home
WS = (0.2, 0.3, 0.4, 0.5)
names = ["installed"] + [f"joint w={w}" for w in WS] + [f"joint w={w}, summaries too" for w in (0.3, 0.4)]
results = {n: {} for n in names}
def sec(r): return r["source_file"] if r["level"] == 1 else r["parent_source_file"]
def rerank(cands, w, summaries_too):
    best = {}
    for r in cands:
        s = sec(r)
        if s and r["level"] <= 1:
            best[s] = max(best.get(s, -1e9), r["score"])
    out = []
    for r in cands:
        r = dict(r)
        if r["level"] == 0 and sec(r) in best:
            r["final"] = (1 - w) * r["score"] + w * best[sec(r)]
        elif summaries_too and r["level"] == 1:
            r["final"] = (1 - w) * r["score"] + w * best[sec(r)]
        else:
            r["final"] = r["score"]
        out.append(r)
    return sorted(out, key=lambda r: (-r["final"], min(x for x in (r["bm25_rank"], r["vector_rank"]) if x is not None), r["id"]))[:10]
with db.connect(db.database_url(load_settings())) as conn:
    conn.row_factory = dict_row
    for set_name in ("bastiat", "tocqueville", "piaf"):
        items = [i for i in load_evalset(home / SETS[set_name]) if half_of(i.id) == HALF]
        if set_name == "piaf": items = spread(items, PIAF_LIMIT)
        scored = {n: [] for n in names}
        for it in items:
            v = vector_literal(embed_query(conn, it.question))
            branch = conn.execute(f"SELECT {COLS} FROM rag.search_sentences(%s::vector, 20, %s) h ORDER BY h.rank", (v, it.book)).fetchall()
            inst = conn.execute(f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, 10, %s) h ORDER BY h.rank", (it.question, v, it.book)).fetchall()
            cands = conn.execute(f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, 80, %s, p_chapter_weight => 0) h ORDER BY h.rank", (it.question, v, it.book)).fetchall()
            il.AFTER, il.EVERY = 1, 3
            scored["installed"].append(score_question(it, "x", il.interleave(inst, branch)))
            for w in WS:
                scored[f"joint w={w}"].append(score_question(it, "x", il.interleave(rerank(cands, w, False), branch)))
            for w in (0.3, 0.4):
                scored[f"joint w={w}, summaries too"].append(score_question(it, "x", il.interleave(rerank(cands, w, True), branch)))
        for n in names:
            results[n][set_name] = aggregate(scored[n], [1, 5, 10])
print(HALF)
print(table(headers_for(results), rows_for(results, names)))
