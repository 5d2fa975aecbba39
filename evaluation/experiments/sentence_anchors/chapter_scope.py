"""The sentence branch restricted to the chapters the fused list already found, beside the
installed branch (the nearest sentences of the whole book). For each question: the fused top k
(rag.search_hybrid), the chapter summaries of its first rows (a level-1 hit's own summary, a
paragraph's parent summary) until M distinct chapters, then those chapters' sentences ranked
exactly and their cited paragraphs taken as rag.search_sentences takes them (best sentence, then
the paragraph's own similarity); merged with the installed interleave. Asked because a scoped
branch needs no third index scan (bench/README: the sentence branch is most of what the default
costs above bm25 + vector). Scored as `bookrag eval` scores. Needs the two books loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/chapter_scope.py tune|heldout|all 2,3,5,10
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
SCOPES = [int(c) for c in (sys.argv[2] if len(sys.argv) > 2 else "2,3,5,10").split(",")]
COLS = "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph, h.parent_source_file"
SQL = """
WITH s AS (
  SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, st.embedding <=> %(v)s::vector AS d
  FROM rag.sentences st WHERE st.source_file = ANY(%(chapters)s)
  ORDER BY d LIMIT %(n)s
), cited AS (
  SELECT s.f, p.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS p(n) GROUP BY s.f, p.n
)
SELECT c.*, cited.sim FROM cited CROSS JOIN LATERAL (
  SELECT n.id, n.source_file, n.chunk_index, n.level, n.content, n.content_token_count, n.paragraph,
         n.parent_source_file, 1 - (n.embedding <=> %(v)s::vector) AS own
  FROM rag.hierarchical_content_nodes n WHERE n.source_file = cited.f AND n.paragraph = cited.n AND n.level = 0
  ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
ORDER BY cited.sim DESC, c.own DESC NULLS LAST, c.id LIMIT %(n)s
"""


def chapters(fused: list[dict], m: int) -> list[str]:
    out: list[str] = []
    for h in fused:
        ch = h["source_file"] if h["level"] == 1 else h["parent_source_file"] if h["level"] == 0 else None
        if ch and ch not in out:
            out.append(ch)
        if len(out) == m:
            break
    return out


def main() -> None:
    with db.connect(db.database_url(load_settings())) as conn:
        conn.row_factory = dict_row
        conn.execute("SET hnsw.ef_search = 40")
        print(f"| {HALF} | book | branch | questions | recall@5 | MRR@10 | paraphrase recall@5 |")
        print("|---|---|---|---|---|---|---|")
        for book in BOOKS:
            items = [
                i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
            ]
            scored: dict[str, list] = {"none": [], "installed": [], **{f"scope {m}": [] for m in SCOPES}}
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
                scored["none"].append(score_question(it, "none", fused))
                scored["installed"].append(score_question(it, "installed", interleave(fused, inst)))
                for m in SCOPES:
                    br = conn.execute(SQL, {"v": v, "chapters": chapters(fused, m), "n": 2 * K}).fetchall()
                    scored[f"scope {m}"].append(score_question(it, str(m), interleave(fused, br)))
            for name, res in scored.items():
                a = aggregate(res, [5])
                para = [r for r in res if r.kind == "paraphrase"]
                print(
                    f"| {HALF} | {book.split('-')[0]} | {name} | {len(res)} | {a['recall@5']:.3f} | {a['mrr@10']:.3f} | "
                    f"{sum(r.recall(5) for r in para) / max(1, len(para)):.3f} |"
                )


if __name__ == "__main__":
    main()
