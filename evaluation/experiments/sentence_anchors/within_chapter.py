"""Should the sentence branch lead a search confined to one chapter? Inside a chapter the branch
ranks only that chapter's own sentences, exactly, and the sentence citing the gold paragraph is
often the first of them; the installed places (after 1, every 3) still give place 1 to the fused
list. Two measures, each with `within` searches at (after 1, every 3) and (after 0, every 3):
  oracle     the gold's chapter given (its summary.md): recall@1, recall@5, answer MRR@10;
  two-step   the eval's agent path (evaluation.harness: default search, its top chapter, a search
             `within` it; only the second search's places change): two-step recall@1, recall@5,
             two-step MRR@10.
A third line runs the oracle within the gold chapter's part (level 2), where the branch ranks
several chapters' sentences. Below the table: for the paraphrase questions, how often the
sentence citing the gold paragraph (the first level-0 chunk of the gold chapter holding an
answer fragment) is the nearest of its chapter's sentences, or among the 3 nearest. Scored as `bookrag eval` scores. Needs the two books loaded; ~1 min.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/within_chapter.py tune|heldout|all
"""

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest, embed_query, search
from evaluation.evalset import load_evalset
from evaluation.harness import top_chapter
from evaluation.metrics import aggregate, contains_answer, score_question
from evaluation.tune_fusion import half_of

HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"
BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")
PLACES = (1, 0)  # sentence_after; sentence_every stays 3


def gold_chapter(item) -> str | None:
    summaries = [f for f in item.expected_files if f.endswith("/summary.md")]
    sources = [
        f.removesuffix("source.md") + "summary.md" for f in item.expected_files if f.endswith("/source.md")
    ]
    return (summaries or sources or [None])[0]


SENTENCE_RANK = """
WITH ranked AS (
  SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps,
         row_number() OVER (ORDER BY st.embedding <=> %(v)s::vector) AS r
  FROM rag.sentences st WHERE st.source_file = %(chapter)s)
SELECT min(r) FROM ranked WHERE f = %(file)s AND %(paragraph)s = ANY(ps)
"""


def citing_sentence_rank(conn, item, chapter: str, emb) -> int | None:
    """Rank of the nearest sentence citing the gold paragraph among its chapter's sentences."""
    rows = conn.execute(
        "SELECT source_file, paragraph, content FROM rag.hierarchical_content_nodes "
        "WHERE parent_source_file = %s AND level = 0 ORDER BY node_order, chunk_index",
        (chapter,),
    ).fetchall()
    gold = next(((f, p) for f, p, c in rows if contains_answer(c, item.answers)), None)
    if gold is None:
        return None
    return conn.execute(
        SENTENCE_RANK, {"v": emb, "chapter": chapter, "file": gold[0], "paragraph": gold[1]}
    ).fetchone()[0]


def main() -> None:
    with db.connect(db.database_url(load_settings())) as conn:
        print(
            f"| {HALF} | book | measure | within | after | questions | recall@1 | recall@5 | MRR@10 | paraphrase r@1 | lexical r@1 |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for book in BOOKS:
            items = [
                i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
            ]
            rows: dict[tuple[str, str, int], list] = {}
            sentence_ranks: list[int | None] = []
            for it in items:
                emb = embed_query(conn, it.question)
                req = SearchRequest(it.question, k=10, book=book)
                first = search(conn, req, emb)
                chapter, gold = top_chapter(first), gold_chapter(it)
                if it.kind == "paraphrase" and gold:
                    sentence_ranks.append(citing_sentence_rank(conn, it, gold, emb))
                part = (
                    conn.execute(
                        "SELECT parent_source_file FROM rag.hierarchical_content_nodes WHERE source_file = %s "
                        "LIMIT 1",
                        (gold,),
                    ).fetchone()
                    if gold
                    else None
                )
                for after in PLACES:
                    for measure, scope, within in (
                        ("oracle", "chapter", gold),
                        ("oracle", "part", part and part[0]),
                        ("two-step", "chapter", chapter),
                    ):
                        if within is None and measure == "oracle":
                            continue  # no gold chapter (or part) to search in: not counted
                        # the agent path without a chapter to open is a miss
                        result = score_question(
                            it,
                            measure,
                            search(conn, replace(req, within=within, sentence_after=after), emb)
                            if within
                            else [],
                        )
                        rows.setdefault((measure, scope, after), []).append(result)
            for (measure, scope, after), res in sorted(
                rows.items(), key=lambda kv: (kv[0][0] != "oracle", kv[0][1], -kv[0][2])
            ):
                a = aggregate(res, [1, 5])
                r1 = {
                    k: aggregate([r for r in res if r.kind == k], [1])["recall@1"]
                    for k in ("paraphrase", "lexical")
                }
                print(
                    f"| {HALF} | {book.split('-')[0]} | {measure} | {scope} | {after} | {len(res)} | {a['recall@1']:.3f} | {a['recall@5']:.3f} "
                    f"| {a['answer_mrr@10']:.3f} | {r1['paraphrase']:.3f} | {r1['lexical']:.3f} |"
                )
            n = len(sentence_ranks)
            first = sum(1 for r in sentence_ranks if r == 1)
            top3 = sum(1 for r in sentence_ranks if r is not None and r <= 3)
            print(
                f"\n{book.split('-')[0]}, {HALF}: the gold paragraph's citing sentence is its chapter's nearest for "
                f"{first} of {n} paraphrase questions, among the 3 nearest for {top3}\n"
            )


if __name__ == "__main__":
    main()
