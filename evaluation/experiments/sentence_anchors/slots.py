"""Slot fusion: keep today's top-(s) paragraphs, then interleave sentence-branch paragraphs (one every
`every` ranks, skipping duplicates). Parameters chosen on the tuning half (same objective as analyse.py).
    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/sentence_anchors/slots.py"""

import contextlib
import io
import runpy

buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    g = runpy.run_path("evaluation/experiments/sentence_anchors/analyse.py")
items, SB, rank_of, base_branch, metrics, objective, tune, tune_para, METHODS = (
    g[k]
    for k in ("items", "SB", "rank_of", "base_branch", "metrics", "objective", "tune", "tune_para", "METHODS")
)


def slots(base, sent, start, every):
    out, seen, bi, si = [], set(), 0, 0
    while len(out) < 40 and (bi < len(base) or si < len(sent)):
        pos = len(out)
        take_sent = pos >= start and (pos - start) % every == 0 and si < len(sent)
        src = sent if take_sent or bi >= len(base) else base
        if src is sent:
            k = sent[si][0]
            si += 1
        else:
            k = base[bi][0]
            bi += 1
        if k not in seen:
            seen.add(k)
            out.append((k, 0))
    return out


grid = []
for sbk in (("plain", 0.0), ("heading", 0.02), ("both", 0.0)):
    for start in (0, 1, 2, 3, 4):
        for every in (1, 2, 3, 5, 100):
            r = {
                x["id"]: rank_of(slots(base_branch(x, "hybrid"), SB[sbk][x["id"]], start, every), x["rel"])
                for x in items
            }
            grid.append(((sbk, start, every), r, objective(r, tune), objective(r, tune_para)))
print(
    "L0 hybrid tune obj all %.3f para %.3f"
    % (objective(METHODS["L0 hybrid"], tune), objective(METHODS["L0 hybrid"], tune_para))
)
grid.sort(key=lambda x: -x[2])
for x in grid[:6]:
    print("top by all-kinds", x[0], "%.3f %.3f" % (x[2], x[3]))
best = grid[0]
print("chosen:", best[0])
for b in ("bastiat", "tocqueville"):
    for scope in ("full", "heldout"):
        row = []
        for kind in ("paraphrase", "lexical", "synthesis", "all"):
            sub = [
                x
                for x in items
                if x["book"] == b
                and (kind == "all" or x["kind"] == kind)
                and (scope == "full" or x["half"] == "heldout")
            ]
            for name, r in (("L0 hybrid", METHODS["L0 hybrid"]), ("slots", best[1])):
                m = metrics([r[x["id"]] for x in sub])
                row.append(f"{kind}/{name}: r@5 {m['r@5']:.3f} MRR {m['mrr']:.3f}")
        print(b, scope, " | ".join(row))
for kind in ("paraphrase", "lexical", "synthesis"):
    for scope in ("full", "heldout"):
        ids = [x["id"] for x in items if x["kind"] == kind and (scope == "full" or x["half"] == "heldout")]
        h = lambda r: r is not None and r <= 5
        w = sum(h(best[1][q]) and not h(METHODS["L0 hybrid"][q]) for q in ids)
        l = sum(h(METHODS["L0 hybrid"][q]) and not h(best[1][q]) for q in ids)
        print(f"slots vs L0 hybrid @5 {kind} {scope}: wins {w} losses {l} (n={len(ids)})")
