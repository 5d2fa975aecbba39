"""Can a linear map of the query vector, learnt from the team's own summary sentences and the
paragraphs they cite, bring reworded questions closer to their 1840s paragraph? The summaries
are modern French, like readers' questions; each anchored sentence is a (modern wording,
paragraph) pair the corpus already holds (rag.sentences). W is fitted by ridge regression
towards the identity, min ||W s - p||^2 + lam ||W - I||^2, with s the sentence embedded as a
query and p the cited paragraph's vector, or contrastively (fit_nce); a question's vector q
becomes normalise(W q). Then
the book's paragraphs (level 0) are ranked by cosine alone, for every question of both books'
evalsets, and for PIAF's (trained on the books only: does the map hurt elsewhere?).
Nothing here sees the evalsets' questions while fitting; lam is chosen on the tuning half.
    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/adapter/linear_adapter.py
"""

import hashlib
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from evaluation.evalset import load_evalset
from evaluation.metrics import contains_answer
from evaluation.tune_fusion import SETS, half_of
from loader.embedding import LocalEmbedder

CACHE = Path(__file__).resolve().parents[3] / ".bookrag" / "experiments" / "adapter"


def unit(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


def cached(name: str, texts: list[str], emb: LocalEmbedder) -> np.ndarray:
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"{name}-{key}.npy"
    if path.exists():
        return np.load(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    out = np.stack([emb.query(t) for t in texts])
    np.save(path, out)
    return out


def training_pairs(conn, emb: LocalEmbedder) -> dict:
    """Sentences (query role) and paragraph chunks, and the (sentence, chunk) pairs anchors give."""
    sents = conn.execute(
        "SELECT s.content, s.cited_source_file, s.cited_paragraphs, s.book FROM rag.sentences s ORDER BY s.id"
    ).fetchall()
    paras = conn.execute(
        "SELECT book, source_file, paragraph, content, embedding FROM "
        "rag.hierarchical_content_nodes WHERE level = 0 AND embedding IS NOT NULL "
        "ORDER BY id"
    ).fetchall()
    P = unit(
        np.array([r[4].to_numpy() for r in paras], dtype=np.float32)
    )  # pgvector Vectors: db.connect registers the type
    books = np.array([r[0] for r in paras])
    index = defaultdict(list)
    for i, r in enumerate(paras):
        index[(r[1], r[2])].append(i)
    S = unit(cached("sentences", [s[0] for s in sents], emb))
    pairs = [(k, i, s[3]) for k, s in enumerate(sents) for n in s[2] for i in index.get((s[1], n), [])]
    tgt = np.array([i for _, i, _ in pairs])
    return {
        "sents": sents,
        "paras": paras,
        "P": P,
        "books": books,
        "X": S[[k for k, _, _ in pairs]],
        "Y": P[tgt],
        "tgt": tgt,
        "sbook": np.array([b for _, _, b in pairs]),
    }


def fit_nce(data: dict, tau: float, wd: float, steps: int) -> np.ndarray:
    """W = I + D maximising each sentence's softmax probability of its cited chunk among every
    chunk of its book (full batch, unnormalised W x, Adam, weight decay on D)."""
    X, P, books, tgt, sbook = data["X"], data["P"], data["books"], data["tgt"], data["sbook"]
    d = X.shape[1]
    masks = {b: np.where(books == b, 0.0, -1e9).astype(np.float32) for b in set(sbook)}
    M = np.stack([masks[b] for b in sbook])
    D = np.zeros((d, d), dtype=np.float32)
    m1 = np.zeros_like(D)
    m2 = np.zeros_like(D)
    for t in range(1, steps + 1):
        logits = (X + X @ D.T) @ P.T / tau + M
        logits -= logits.max(1, keepdims=True)
        pr = np.exp(logits)
        pr /= pr.sum(1, keepdims=True)
        G = (pr @ P - P[tgt]) / tau / len(X)
        g = G.T @ X + wd * D
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        D -= 1e-3 * (m1 / (1 - 0.9**t)) / (np.sqrt(m2 / (1 - 0.999**t)) + 1e-8)
    return np.eye(d, dtype=np.float32) + D


def main() -> None:
    settings = load_settings()
    emb = LocalEmbedder()
    with db.connect(db.database_url(settings)) as conn:
        data = training_pairs(conn, emb)
    sents, paras, P, books, X, Y = (data[k] for k in ("sents", "paras", "P", "books", "X", "Y"))
    print(f"{len(sents)} sentences, {len(X)} sentence-paragraph pairs, {len(P)} paragraph chunks")
    d = X.shape[1]

    items = []
    for name in ("bastiat", "tocqueville", "piaf"):
        path = settings.home / SETS[name]
        its = load_evalset(path)
        if name == "piaf":
            its = its[:300]
        items += [(name, it) for it in its]
    Q = unit(cached("questions", [it.question for _, it in items], emb))
    gold = []
    for name, it in items:
        cand = np.nonzero(books == it.book)[0]
        gold.append((cand, {i for i in cand if contains_answer(paras[i][3], it.answers)}))

    def score(W):
        res = defaultdict(list)
        Qa = unit(Q @ W.T) if W is not None else Q
        for (name, it), q, (cand, g) in zip(items, Qa, gold):
            if not g:
                continue
            sims = P[cand] @ q
            order = cand[np.argsort(-sims)]
            # rank of the first gold chunk counted per distinct paragraph
            seen, rank = set(), None
            for i in order[:200]:
                key = (paras[i][1], paras[i][2])
                if key in seen:
                    continue
                seen.add(key)
                if i in g:
                    rank = len(seen)
                    break
            h = half_of(it.id)
            for kind in (it.kind, "all"):
                res[(name, h, kind)].append(rank)
        return res

    def fmt(ranks):
        r5 = np.mean([r is not None and r <= 5 for r in ranks])
        mrr = np.mean([1 / r if r is not None and r <= 10 else 0 for r in ranks])
        return f"{r5:.3f}/{mrr:.3f}"

    base = score(None)
    keys = sorted(base)
    print("| W | " + " | ".join(f"{n} {h} {k} ({len(base[(n, h, k)])})" for n, h, k in keys) + " |")
    print("| none | " + " | ".join(fmt(base[k]) for k in keys) + " |")
    XtX, XtY = X.T @ X, X.T @ Y
    for lam in (10, 100):
        W = np.linalg.solve(XtX + lam * np.eye(d), XtY + lam * np.eye(d)).T
        res = score(W)
        print(f"| ridge {lam} | " + " | ".join(fmt(res[k]) for k in keys) + " |")
    for tau, wd, steps in ((0.05, 1e-3, 100), (0.05, 1e-3, 300), (0.02, 1e-3, 200), (0.05, 1e-2, 300)):
        res = score(fit_nce(data, tau, wd, steps))
        print(f"| nce tau {tau} wd {wd} steps {steps} | " + " | ".join(fmt(res[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
