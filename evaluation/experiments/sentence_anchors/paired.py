"""Paired comparisons (paraphrase, both books, r@5 and r@10) from $TMPDIR/sentexp/results.pkl; exact sign test.
cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/paired.py"""

import hashlib
import pickle
import tempfile
from math import comb
from pathlib import Path

m = pickle.load(open(str(Path(tempfile.gettempdir()) / "sentexp" / "results.pkl"), "rb"))["methods"]
runs = pickle.loads(Path(str(Path(tempfile.gettempdir()) / "sentexp" / "runs.pkl")).read_bytes())
kinds = {r["item"].id: r["item"].kind for r in runs["items"]}
half = lambda q: "tune" if hashlib.sha256(q.encode()).digest()[0] % 2 == 0 else "heldout"
names = {k: k for k in m}


def find(prefix):
    return next(k for k in m if k.startswith(prefix))


A = "L0 hybrid"
for B in [
    "L0 hybrid+cite0.4",
    "sentences plain tight=0.0",
    find("fusion(all-kinds tuned)"),
    find("fusion(paraphrase tuned, guarded)"),
]:
    for kind in ("paraphrase", "lexical", "synthesis"):
        for scope in ("full", "heldout"):
            ids = [q for q in m[A] if kinds[q] == kind and (scope == "full" or half(q) == "heldout")]
            for K in (5, 10):
                hit = lambda r: r is not None and r <= K
                w = sum(1 for q in ids if hit(m[B][q]) and not hit(m[A][q]))
                l = sum(1 for q in ids if hit(m[A][q]) and not hit(m[B][q]))
                n = w + l
                p = min(1.0, 2 * sum(comb(n, i) for i in range(0, min(w, l) + 1)) / 2**n) if n else 1.0
                print(
                    f"{B[:60]:60s} vs {A} {kind:10s} {scope:7s} @{K:<2d} wins {w:2d} losses {l:2d} sign-test p={p:.3f} (n={len(ids)})"
                )
