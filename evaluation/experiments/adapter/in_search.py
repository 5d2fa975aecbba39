"""The contrastive query adapter of linear_adapter.py inside the whole default search: every
question of both books' evalsets searched once with its own vector and once with
normalise(W q), scored as `bookrag eval` scores (answer rank). W is fitted on rag.sentences and
the paragraphs they cite (no question seen). Needs the books loaded.
- no argument: rag.search (auto, k 10, the question's book) with the adapted vector everywhere;
- `stage1`: the adapted vector only in stage 1's kNN (levels 0-1), the original one for the
  sentence branch and the rest: a copy of the installed rag._default_search taking a second
  vector, made for the run as rag._exp_adapted and dropped after (no book filter).
    cd /work/main && OMP_NUM_THREADS=2 .venv/bin/python evaluation/experiments/adapter/in_search.py [stage1]
"""

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from linear_adapter import cached, fit_nce, training_pairs, unit

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of
from loader.embedding import LocalEmbedder

COLS = "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph, h.parent_source_file"
SEARCH = f"SELECT {COLS} FROM rag.search(%s, %s::vector, p_k => 10, p_book => %s) h ORDER BY h.rank"
STAGE_ONE = f"SELECT {COLS} FROM rag._exp_adapted(%s, %s::vector, 10, %s::vector) h ORDER BY h.rank"
STAGE = "stage1" in sys.argv[1:]
CONFIGS = [(0.05, 1e-2, 300), (0.05, 1e-3, 100), (0.05, 1e-2, 100), (0.02, 1e-3, 200)]


def make_stage_one_variant(conn) -> None:
    """rag._exp_adapted(query, vector, k, adapted): the installed rag._default_search with its
    stage-1 kNN ordered by the adapted vector."""
    text = conn.execute("SELECT pg_get_functiondef('rag._default_search'::regproc)").fetchone()[0]
    head = "FUNCTION rag._default_search(p_query text, p_query_embedding vector, p_k integer)"
    knn = "<=> p_query_embedding::vector(384)"
    assert head in text and text.count(knn) == 2, "the installed rag._default_search changed shape"
    text = text.replace(
        head,
        "FUNCTION rag._exp_adapted(p_query text, p_query_embedding vector, p_k integer, p_adapted vector)",
    ).replace(knn, "<=> p_adapted::vector(384)")
    conn.execute(text)


def run_variants(conn, emb: LocalEmbedder, items: list, Q: np.ndarray) -> dict:
    """Every question searched with its own vector and with each fitted map's: results by variant."""
    data = training_pairs(conn, emb)
    variants = {"none": None}
    for c in CONFIGS:
        variants[f"nce tau {c[0]} wd {c[1]} steps {c[2]}"] = fit_nce(data, *c)
    conn.row_factory = dict_row
    res = {}
    for name, W in variants.items():
        r = defaultdict(list)
        Qa = Q if W is None else unit(Q @ W.T)
        for (set_name, it), q, qa in zip(items, Q, Qa):
            if STAGE:
                rows = conn.execute(
                    STAGE_ONE, (it.question, vector_literal(q), vector_literal(qa))
                ).fetchall()
            else:
                rows = conn.execute(SEARCH, (it.question, vector_literal(qa), it.book)).fetchall()
            result = score_question(it, "auto", rows)
            for kind in (it.kind, "all"):
                r[(set_name, half_of(it.id), kind)].append(result)
        res[name] = r
    return res


def main() -> None:
    settings = load_settings()
    emb = LocalEmbedder()
    items = [(n, it) for n in ("bastiat", "tocqueville") for it in load_evalset(settings.home / SETS[n])]
    Q = unit(cached("questions-books", [it.question for _, it in items], emb))
    with db.connect(db.database_url(settings), autocommit=True) as conn:
        if STAGE:
            make_stage_one_variant(conn)
        try:
            res = run_variants(conn, emb, items, Q)
        finally:  # the variant is the run's own: never left behind, even when the run fails
            if STAGE:
                conn.execute("DROP FUNCTION rag._exp_adapted(text, vector, integer, vector)")
    keys = sorted(res["none"])

    def measures(results) -> tuple[float, float]:
        agg = aggregate(results, [5])
        return agg["recall@5"], agg["answer_mrr@10"]

    def fmt(results) -> str:
        return "{:.3f}/{:.3f}".format(*measures(results))

    def mean(r, half) -> float:
        return float(np.mean([m for s in ("bastiat", "tocqueville") for m in measures(r[(s, half, "all")])]))

    print(
        "| variant | tune mean | heldout mean | "
        + " | ".join(f"{s} {h} {k} ({len(res['none'][(s, h, k)])})" for s, h, k in keys)
        + " |"
    )
    for name, r in res.items():
        print(
            f"| {name} | {mean(r, 'tune'):.3f} | {mean(r, 'heldout'):.3f} | "
            + " | ".join(fmt(r[k]) for k in keys)
            + " |"
        )


if __name__ == "__main__":
    main()
