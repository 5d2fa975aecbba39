"""Step 2b/3: sentence-anchor ranking, fusion with today's search, metrics. Offline (cached data only).

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/sentence_anchors/analyse.py > $TMPDIR/sentexp/report.txt

Unit = a paragraph (source_file, paragraph). A paragraph is relevant when one of its level-0
chunks contains an answer fragment (evaluation.metrics.contains_answer). Every method yields a
ranked list of paragraphs; rank = 1-based position of the first relevant paragraph.
Baselines: today's level-0 searches (k=40, levels=[0]) deduplicated by paragraph; plus the
harness's own paragraph_rank (all levels, chunk ranks, k=10) = the figures `./run eval` prints.
"""

import hashlib
import json
import pickle
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from evaluation.metrics import contains_answer

D = Path(tempfile.gettempdir()) / "sentexp"
runs = pickle.loads((D / "runs.pkl").read_bytes())
sents = json.loads((D / "sentences.json").read_text())
EMB = {n: np.load(D / f"emb_{n}.npy") for n in ("plain", "heading")}
BOOKS = {"bastiat-sophismes-economiques": "bastiat", "tocqueville-democratie-en-amerique": "tocqueville"}

# paragraph -> contents of its chunks
para_text = defaultdict(list)
for book, sf, p, ci, content in runs["rows"]:
    para_text[(sf, p)].append(content)
book_paras = defaultdict(set)
chunk_para = {}
for book, sf, p, ci, content in runs["rows"]:
    book_paras[book].add((sf, p))
    chunk_para[(sf, ci)] = p
cited_paras = {(s["source_file"], p) for s in sents for p in s["paragraphs"]}
print(
    f"sentences {len(sents)}, anchors {sum(s['n_anchors'] for s in sents)}, cited (paragraph) pairs "
    f"{sum(len(s['paragraphs']) for s in sents)}, distinct cited paragraphs {len(cited_paras)}"
)
for b in BOOKS:
    n = len(book_paras[b])
    c = len([x for x in book_paras[b] if x in cited_paras])
    ss = [s for s in sents if s["book"] == b]
    hist = np.bincount([len(s["paragraphs"]) for s in ss])
    print(
        f"  {BOOKS[b]}: {len(ss)} sentences, {sum(s['n_anchors'] for s in ss)} anchors, paragraphs cited "
        f"{c}/{n} ({c / n:.0%}); paragraphs per sentence histogram {dict(enumerate(hist.tolist()))}"
    )


def half(qid):
    return "tune" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "heldout"


items = []
for rec in runs["items"]:
    it = rec["item"]
    rel = {k for k in book_paras[it.book] if any(contains_answer(c, it.answers) for c in para_text[k])}
    q = rec["qvec"] / np.linalg.norm(rec["qvec"])
    items.append(
        {
            "rec": rec,
            "id": it.id,
            "kind": it.kind,
            "book": BOOKS[it.book],
            "bookfull": it.book,
            "half": half(it.id),
            "rel": rel,
            "q": q,
        }
    )
norel = [x["id"] for x in items if not x["rel"]]
print(f"questions {len(items)}; without any answer-bearing level-0 paragraph: {len(norel)} {norel[:8]}")
print("answer paragraph cited by some sentence (ceiling of the sentence branch), by book/kind:")
for b in BOOKS.values():
    for k in ("paraphrase", "lexical", "synthesis"):
        sub = [x for x in items if x["book"] == b and x["kind"] == k]
        print(f"  {b} {k}: {sum(bool(x['rel'] & cited_paras) for x in sub)}/{len(sub)}")

sent_idx = {b: [i for i, s in enumerate(sents) if s["book"] == b] for b in BOOKS}


def sentence_branch(x, emb="plain", tight=0.0, agg="max"):
    """Paragraph -> score from the sentences citing it: the best cosine (minus tight * log(#cited)
    of that sentence, i.e. a penalty for broad anchors); ties broken by fewer cited paragraphs."""
    idx = sent_idx[x["bookfull"]]
    cos = EMB[emb][idx] @ x["q"]
    best = {}
    for j, c in zip(idx, cos):
        s = sents[j]
        n = len(s["paragraphs"])
        sc = c - tight * np.log(n)
        key = (sc, -n)
        for p in s["paragraphs"]:
            k = (s["source_file"], p)
            if agg == "max":
                if k not in best or key > best[k]:
                    best[k] = key
    ranked = sorted(best.items(), key=lambda kv: kv[1], reverse=True)
    return [(k, v[0]) for k, v in ranked]


def base_branch(x, name):
    """Today's level-0 list deduplicated by paragraph (best chunk's score)."""
    seen = {}
    for h in x["rec"]["lists"][name]:
        k = (h["source_file"], chunk_para[(h["source_file"], h["chunk_index"])])
        if k not in seen:
            seen[k] = h["score"]
    return list(seen.items())


def norm(lst, how):
    s = np.array([v for _, v in lst], dtype=float)
    if len(s) == 0:
        return {}, 0.0
    if how == "minmax":
        z = (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else np.ones_like(s)
        floor = 0.0
    else:
        z = (s - s.mean()) / s.std() if s.std() > 0 else np.ones_like(s)
        floor = max(float(z.min()), 0.0) if False else float(z.min())
    return {k: float(v) for (k, _), v in zip(lst, z)}, floor


def fuse(base, sent, w, how="zscore", pool=40):
    if how == "rrf":
        sc = defaultdict(float)
        for r, (k, _) in enumerate(base):
            sc[k] += (1 - w) / (60 + r + 1)
        for r, (k, _) in enumerate(sent[:pool]):
            sc[k] += w / (60 + r + 1)
        return sorted(sc.items(), key=lambda kv: -kv[1])
    bn, bf = norm(base, how)
    sn, sf = norm(sent[:pool], how)
    keys = set(bn) | set(sn)
    sc = {k: (1 - w) * bn.get(k, bf) + w * sn.get(k, sf) for k in keys}
    order = {k: i for i, (k, _) in enumerate(base)}
    return sorted(sc.items(), key=lambda kv: (-kv[1], order.get(kv[0], 999)))


def rank_of(ranked, rel):
    for i, (k, _) in enumerate(ranked, 1):
        if k in rel:
            return i
    return None


def metrics(ranks):
    n = len(ranks) or 1
    r = lambda k: sum(1 for x in ranks if x is not None and x <= k) / n
    mrr = sum(1 / x for x in ranks if x is not None and x <= 10) / n
    return {"r@1": r(1), "r@5": r(5), "r@10": r(10), "mrr": mrr, "n": len(ranks)}


def objective(ranks_by_item, subset):
    """Mean over the two books of (r@5 + MRR@10)/2 on the subset."""
    vals = []
    for b in BOOKS.values():
        m = metrics([ranks_by_item[x["id"]] for x in subset if x["book"] == b])
        vals.append((m["r@5"] + m["mrr"]) / 2)
    return float(np.mean(vals))


METHODS = {}  # name -> {id: rank}
for x in items:
    h = x["rec"]["harness"]
    METHODS.setdefault("today default (harness, all levels, chunk rank)", {})[x["id"]] = h["hybrid"][
        "paragraph_rank"
    ]
    METHODS.setdefault("vector-only (harness, all levels, chunk rank)", {})[x["id"]] = h["vector"][
        "paragraph_rank"
    ]
    for name in x["rec"]["lists"]:
        METHODS.setdefault(f"L0 {name}", {})[x["id"]] = rank_of(base_branch(x, name), x["rel"])

# sentence branch variants
SB = {}
for emb in ("plain", "heading"):
    for tight in (0.0, 0.02, 0.05):
        name = f"sentences {emb} tight={tight}"
        SB[(emb, tight)] = {x["id"]: sentence_branch(x, emb, tight) for x in items}
        METHODS[name] = {x["id"]: rank_of(SB[(emb, tight)][x["id"]], x["rel"]) for x in items}
EMB["both"] = None


def both_branch(x):
    a = dict(sentence_branch(x, "plain", 0.0))
    b = dict(sentence_branch(x, "heading", 0.0))
    return sorted(((k, max(a.get(k, -1), b.get(k, -1))) for k in set(a) | set(b)), key=lambda kv: -kv[1])


SB[("both", 0.0)] = {x["id"]: both_branch(x) for x in items}
METHODS["sentences both tight=0.0"] = {x["id"]: rank_of(SB[("both", 0.0)][x["id"]], x["rel"]) for x in items}

tune = [x for x in items if x["half"] == "tune"]
tune_para = [x for x in tune if x["kind"] == "paraphrase"]
print(
    f"\ntuning half: {len(tune)} questions ({len(tune_para)} paraphrase); held-out {len(items) - len(tune)}"
)

# choose the sentence-branch variant on the tuning half (all kinds)
sb_scores = {k: objective(METHODS[f"sentences {k[0]} tight={k[1]}"], tune) for k in SB}
best_sb = max(sb_scores, key=sb_scores.get)
print("sentence-branch variants, tuning-half objective (all kinds / paraphrase only):")
for k, v in sb_scores.items():
    print(f"  {k}: {v:.3f} / {objective(METHODS[f'sentences {k[0]} tight={k[1]}'], tune_para):.3f}")
print("chosen sentence branch:", best_sb)

# fusion grid on the tuning half
grid = []
for base in ("hybrid", "vector"):
    for sbk in SB:
        for how in ("zscore", "minmax", "rrf"):
            for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
                ranks = {
                    x["id"]: rank_of(fuse(base_branch(x, base), SB[sbk][x["id"]], w, how), x["rel"])
                    for x in items
                }
                grid.append(((base, sbk, how, w), ranks, objective(ranks, tune), objective(ranks, tune_para)))
grid.sort(key=lambda g: -g[2])
print("\nfusion grid, top 8 by tuning-half objective (all kinds) [obj_all, obj_paraphrase]:")
for g in grid[:8]:
    print(f"  {g[0]}: {g[2]:.3f} {g[3]:.3f}")
best_all = grid[0]
best_para = max(grid, key=lambda g: (g[3], g[2]))
base_obj = objective(METHODS["L0 hybrid"], tune)
guarded = [g for g in grid if g[0][0] == "hybrid" and g[2] >= base_obj]
best_guard = max(guarded, key=lambda g: (g[3], g[2]))
print(
    f"best paraphrase objective among hybrid-based fusions not below L0 hybrid on all kinds ({base_obj:.3f}):",
    best_guard[0],
    f"para {best_guard[3]:.3f} all {best_guard[2]:.3f}",
)
with open(D / "grid.txt", "w") as fh:
    for g in sorted(grid, key=lambda g: g[0][:2] + (g[0][2], g[0][3])):
        fh.write(f"{g[0]}\ttune_all {g[2]:.3f}\ttune_para {g[3]:.3f}\n")
print("best on paraphrase tuning half:", best_para[0], f"{best_para[3]:.3f} (all {best_para[2]:.3f})")
hyb_only = [g for g in grid if g[0][0] == "hybrid"]
best_hyb = hyb_only[0]
print("best with the hybrid default as base:", best_hyb[0], f"{best_hyb[2]:.3f}")
# objective of baselines on tuning half for reference
for name in ("L0 hybrid", "L0 vector", *[f"L0 hybrid+cite{c}" for c in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)]):
    print(
        f"  baseline {name}: tune obj all {objective(METHODS[name], tune):.3f} paraphrase {objective(METHODS[name], tune_para):.3f}"
    )
cite_best = max(
    (f"L0 hybrid+cite{c}" for c in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)), key=lambda n: objective(METHODS[n], tune)
)
print("chosen existing chunk-level cite_weight:", cite_best)

METHODS[f"fusion(all-kinds tuned) {best_all[0]}"] = best_all[1]
METHODS[f"fusion(hybrid base) {best_hyb[0]}"] = best_hyb[1]
METHODS[f"fusion(paraphrase tuned) {best_para[0]}"] = best_para[1]
METHODS[f"fusion(paraphrase tuned, guarded) {best_guard[0]}"] = best_guard[1]

SHOW = [
    "today default (harness, all levels, chunk rank)",
    "vector-only (harness, all levels, chunk rank)",
    "L0 hybrid",
    "L0 vector",
    cite_best,
    f"sentences {best_sb[0]} tight={best_sb[1]}",
    "sentences plain tight=0.0",
    "sentences heading tight=0.0",
    f"fusion(all-kinds tuned) {best_all[0]}",
    f"fusion(hybrid base) {best_hyb[0]}",
    f"fusion(paraphrase tuned) {best_para[0]}",
    f"fusion(paraphrase tuned, guarded) {best_guard[0]}",
    "sentences both tight=0.0",
]
SHOW = list(dict.fromkeys(SHOW))
results = {}
for b in BOOKS.values():
    for scope in ("full", "heldout"):
        print(f"\n## {b} — {scope}")
        print(
            "| method | paraphrase r@1/r@5/r@10/MRR | lexical r@5/MRR | synthesis r@5/MRR | all r@5/MRR | n(para/lex/syn) |"
        )
        print("|---|---|---|---|---|---|")
        for name in SHOW:
            cells, ns = [], []
            for kind in ("paraphrase", "lexical", "synthesis", "all"):
                sub = [
                    x
                    for x in items
                    if x["book"] == b
                    and (kind == "all" or x["kind"] == kind)
                    and (scope == "full" or x["half"] == "heldout")
                ]
                m = metrics([METHODS[name][x["id"]] for x in sub])
                results[(b, scope, name, kind)] = m
                if kind == "paraphrase":
                    cells.append(f"{m['r@1']:.3f}/{m['r@5']:.3f}/{m['r@10']:.3f}/{m['mrr']:.3f}")
                else:
                    cells.append(f"{m['r@5']:.3f}/{m['mrr']:.3f}")
                ns.append(m["n"])
            print(f"| {name} | " + " | ".join(cells) + f" | {ns[0]}/{ns[1]}/{ns[2]} |")
pickle.dump({"results": results, "methods": METHODS}, open(D / "results.pkl", "wb"))
