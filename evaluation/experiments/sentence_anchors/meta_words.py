"""The BM25 query without the words that name the author or the book ("selon l'auteur",
"Tocqueville", "le penseur", "l'ouvrage"), which reader questions use and the books' editor notes
contain; the query vector is still the whole question's. Default search and BM25 alone, on the
chosen half, scored as `bookrag eval` scores. Needs the two books loaded; about 1 min.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/meta_words.py tune|heldout|all
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest, embed_query, search
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import half_of

HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"
META = re.compile(r"\b(?:l['’])?(?:auteur|selon|tocqueville|bastiat|penseur|ouvrage|livre)\b", re.I)
with db.connect(db.database_url(load_settings())) as conn:
    for book in ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"):
        items = [
            i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
        ]
        out = {"as is": [], "meta stripped": [], "bm25 as is": [], "bm25 stripped": []}
        changed = 0
        for it in items:
            e = embed_query(conn, it.question)
            q2 = re.sub(r"\s+", " ", META.sub(" ", it.question)).strip()
            changed += q2 != it.question
            for name, q, mode in (
                ("as is", it.question, "hybrid"),
                ("meta stripped", q2, "hybrid"),
                ("bm25 as is", it.question, "bm25"),
                ("bm25 stripped", q2, "bm25"),
            ):
                hits = search(conn, SearchRequest(q, mode, 10, book), e)
                out[name].append(score_question(it, name, hits))
        for name, res in out.items():
            a = aggregate(res, [5])
            print(
                f"| {HALF} | {book[:10]} | {name} | {len(res)} ({changed} changed) | {a['recall@5']:.3f} | {a['mrr@10']:.3f} |"
            )
