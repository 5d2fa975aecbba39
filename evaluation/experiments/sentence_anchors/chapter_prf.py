"""Two re-rankings of the sentence branch, replayed through the installed interleave.

  chapter  sentence score = (1 - b) * minmax(cos(q, sentence)) + b * minmax(chapter signal of the
           summary the sentence belongs to): 'vec' the best cosine of that summary's chunks,
           'bm25' its BM25 score among level-1 rows, 'both' their mean.
  prfM     pseudo-relevance feedback (Rocchio): q' = q + b * mean of the M nearest sentences'
           vectors, normalised; the branch re-ranked with q'.
The book's sentences are ranked exactly here (b = 0 is the installed branch up to the HNSW
approximation and tie order); each paragraph is represented by its chunk closest to q, as in
rag.search_sentences. The fused list is rag.search_hybrid's top k, as rag.search merges it.
Scored as `bookrag eval` scores. Needs the two books loaded; about 45 s per half.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/chapter_prf.py tune|heldout|all
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
from interleave import AFTER, BOOKS, COLS, EVERY, K, interleave  # noqa: F401  (the installed merge)
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import half_of

HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"
GRID = [("chapter", b, s) for s in ("vec", "bm25", "both") for b in (0.1, 0.2, 0.3, 0.4, 0.5)] + [
    ("prf", b, m) for m in (3, 5, 10) for b in (0.3, 0.6, 1.0)
]


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def vec(v) -> np.ndarray:
    return np.asarray(v.to_numpy(), dtype=np.float32)


def branch(book: dict, q: np.ndarray, bm25: dict, kind: str, b: float, signal) -> list[dict]:
    S, sents = book["S"], book["sents"]
    if kind == "prf" and b:
        q = q + b * S[np.argsort(-(S @ q))[:signal]].mean(axis=0)
        q = q / np.linalg.norm(q)
    score = minmax(S @ q)
    if kind == "chapter" and b:
        files = sorted({s["source_file"] for s in sents})
        v = minmax(
            np.array([max((float(e @ q) for f2, e in book["summ"] if f2 == f), default=0.0) for f in files])
        )
        m = np.array([bm25.get(f, 0.0) for f in files])
        m = minmax(m) if m.max() > 0 else m
        chap = dict(zip(files, {"vec": v, "bm25": m, "both": (v + m) / 2}[signal]))
        score = (1 - b) * score + b * np.array([chap[s["source_file"]] for s in sents])
    best: dict = {}
    for i in np.argsort(-score):
        for p in sents[i]["cited_paragraphs"]:
            best.setdefault((sents[i]["cited_source_file"], p), score[i])
        if len(best) >= 3 * K:
            break
    out = []
    for k in sorted(best, key=lambda k: -best[k])[: 2 * K]:
        rows = book["paras"].get(k, [])
        if rows:
            out.append(
                max(
                    rows,
                    key=lambda r: (float(r["emb"] @ q) if r["emb"] is not None else -9, -r["chunk_index"]),
                )
            )
    return out


with db.connect(db.database_url(load_settings())) as conn:
    register_vector(conn)
    conn.row_factory = dict_row
    print(f"| {HALF} | re-ranking | book | questions | recall@5 | MRR@10 | paraphrase recall@5 |")
    print("|---|---|---|---|---|---|---|")
    for name in BOOKS:
        sents = conn.execute(
            "SELECT source_file, cited_source_file, cited_paragraphs, embedding FROM rag.sentences "
            "WHERE book = %s ORDER BY id",
            (name,),
        ).fetchall()
        book = {
            "sents": sents,
            "S": np.array([vec(s["embedding"]) for s in sents]),
            "summ": [
                (r["source_file"], vec(r["embedding"]))
                for r in conn.execute(
                    "SELECT source_file, embedding FROM rag.hierarchical_content_nodes WHERE book = %s AND level = 1 "
                    "AND embedding IS NOT NULL",
                    (name,),
                )
            ],
            "paras": {},
        }
        for r in conn.execute(
            "SELECT id, source_file, chunk_index, level, content, content_token_count, paragraph, "
            "embedding FROM rag.hierarchical_content_nodes WHERE book = %s AND level = 0",
            (name,),
        ):
            r["emb"] = vec(r.pop("embedding")) if r["embedding"] is not None else r.pop("embedding")
            book["paras"].setdefault((r["source_file"], r["paragraph"]), []).append(r)
        items = [
            i for i in load_evalset(Path(f"evals/{name}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
        ]
        scored: dict = {}
        for it in items:
            q = np.asarray(embed_query(conn, it.question), dtype=np.float32)
            fused = conn.execute(
                f"SELECT {COLS} FROM rag.search_hybrid(%s, %s, {K}, %s) h ORDER BY h.rank",
                (it.question, q, name),
            ).fetchall()
            bm25 = {
                r["source_file"]: r["score"]
                for r in conn.execute(
                    "SELECT source_file, score FROM rag.search_branch(%s, NULL, 'bm25', 200, %s, '{1}')",
                    (it.question, name),
                )
            }
            for kind, b, signal in [("exact", 0.0, None), *GRID]:
                hits = interleave(fused, branch(book, q, bm25, kind, b, signal))
                scored.setdefault((kind, b, signal), []).append(score_question(it, kind, hits))
        for (kind, b, signal), results in scored.items():
            a = aggregate(results, [5])
            para = [r for r in results if r.kind == "paraphrase"]
            print(
                f"| | {kind} {b} {signal or ''} | {name.split('-')[0]} | {len(results)} | {a['recall@5']:.3f} | "
                f"{a['mrr@10']:.3f} | {sum(r.recall(5) for r in para) / max(1, len(para)):.3f} |"
            )
