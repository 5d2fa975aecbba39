"""Does two-stage's second search from static statements (rag._search_in_sections, migration
0016) give what that search was until then on real questions: rag.search_hybrid restricted to
the kept sections' paragraphs (levels {0}, parent_files, k and pool greatest(k, pool), no
chapter term), scored by two-stage (0.7 x its score min-max normalised + 0.3 x the section's
score) and ranked by that, then the hybrid rank, then id? For every question of both halves of
the two books' evalsets and PIAF's (spread to PIAF_LIMIT per half, default 100): the 5
sections two-stage's stage 1 keeps (from rag.search_hybrid's rows, as rag.search_two_stage
computes them), then both at k 1, 5, 10 and 30, with pool 100 (the default's) and 10, without
a book and within the question's book. Compared: the ids in order, the branch ranks and the
vector scores exactly, the final scores to 1e-6; the bm25_score is not compared (pg_search adds
a constant per filter, and the old statement also filtered by the book). Since migration 0019
(decision 28) the function ranks the BM25 rows its caller gives (two-stage gives the first
search's) instead of querying pg_search: here it is given the BM25 rows rag.search_hybrid reads
inside the sections (its top greatest(k, pool)), so the comparison checks the kNN branch, the
fusion and the scoring, as before. Needs the books (and PIAF) loaded; reads only.
    cd /work/main && .venv/bin/python evaluation/experiments/latency/second_search.py [PIAF_LIMIT]
"""

import math
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tqdm import tqdm

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.tune_fusion import half_sets

SECTIONS = """
SELECT array_agg(x.sec ORDER BY x.best DESC, x.sec),
       array_agg(coalesce((x.best - x.lo) / nullif(x.hi - x.lo, 0), 1) ORDER BY x.best DESC, x.sec)
FROM (SELECT s.*, min(s.best) OVER () AS lo, max(s.best) OVER () AS hi FROM (
        SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS sec, max(h.score) AS best
        FROM rag.search_hybrid(%(q)s, %(e)s, p_k => greatest(%(pool)s, 50), p_book => %(book)s, p_pool => %(pool)s,
                               p_chapter_weight => 0) h
        WHERE h.level <= 1 AND CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END IS NOT NULL
        GROUP BY 1 ORDER BY best DESC, sec LIMIT 5) s) x
"""
BEFORE = """
WITH h AS (
    SELECT * FROM rag.search_hybrid(%(q)s, %(e)s, p_k => greatest(%(k)s, %(pool)s), p_book => %(book)s,
                                    p_levels => '{0}', p_parent_files => %(secs)s, p_pool => %(pool)s, p_chapter_weight => 0)
), sec AS (
    SELECT u.f, u.sc FROM unnest(%(secs)s::text[], %(scores)s::float8[]) AS u(f, sc)
), scored AS (
    SELECT h.id, h.rank, h.bm25_rank, h.vector_rank, h.vector_score,
           0.7 * coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1)
           + 0.3 * sec.sc AS final
    FROM h JOIN sec ON sec.f = h.parent_source_file
)
SELECT id, final, bm25_rank, vector_rank, vector_score FROM scored ORDER BY final DESC, rank, id LIMIT %(k)s
"""
BM25_ROWS = """
SELECT coalesce(array_agg(h.id ORDER BY h.bm25_rank), '{}'), coalesce(array_agg(h.bm25_score ORDER BY h.bm25_rank), '{}')
FROM rag.search_hybrid(%(q)s, %(e)s, p_k => 1000, p_book => %(book)s, p_levels => '{0}', p_parent_files => %(secs)s,
                       p_pool => greatest(%(k)s, %(pool)s), p_chapter_weight => 0) h
WHERE h.bm25_rank <= greatest(%(k)s, %(pool)s)
"""
AFTER = """
SELECT id, score, bm25_rank, vector_rank, vector_score
FROM rag._search_in_sections(%(q)s, %(e)s, %(model)s, %(secs)s, %(scores)s, %(ids)s, %(bm25)s, %(k)s, %(pool)s, 0.3,
                             NULL, NULL, NULL, NULL)
"""
KS = (1, 5, 10, 30)
POOLS = (100, 10)


def same(a: list[tuple], b: list[tuple]) -> bool:
    return (
        len(a) == len(b)
        and all(x[0] == y[0] and x[2:] == y[2:] for x, y in zip(a, b))
        and all(math.isclose(x[1], y[1], abs_tol=1e-6) for x, y in zip(a, b))
    )


def main() -> None:
    piaf_limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    settings = load_settings()
    equal: Counter = Counter()
    total: Counter = Counter()
    differ = []
    with db.connect(db.database_url(settings), autocommit=True) as conn:
        model = conn.execute("SELECT model FROM rag.embedding_models").fetchone()[0]
        for half in ("tune", "heldout"):
            for set_name, items in half_sets(settings.home, half, piaf_limit).items():
                for it in tqdm(items, desc=f"{set_name} {half}", unit="q"):
                    e = vector_literal(embed_query(conn, it.question))
                    for book in (None, it.book):
                        for pool in POOLS:
                            p = {"q": it.question, "e": e, "book": book, "pool": pool, "model": model}
                            p["secs"], p["scores"] = conn.execute(SECTIONS, p).fetchone()
                            if not p["secs"]:
                                continue
                            for k in KS:
                                p["k"] = k
                                key = (pool, "book" if book else "all")
                                total[key] += 1
                                p["ids"], p["bm25"] = conn.execute(BM25_ROWS, p).fetchone()
                                if same(
                                    conn.execute(BEFORE, p).fetchall(), conn.execute(AFTER, p).fetchall()
                                ):
                                    equal[key] += 1
                                else:
                                    differ.append((set_name, it.id, key, k))
    print("pool | book | calls | equal")
    for key in sorted(total):
        print(f"{key[0]:4} | {key[1]:4} | {total[key]:5} | {equal[key]}")
    if differ:
        print("differ:", differ[:20])


if __name__ == "__main__":
    main()
