"""Issue 11 asks for reworded questions found (paraphrase recall@5 >= 0.50) and for a context
precision not lower than two-stage's before the sentence branch joined it (0.597 Bastiat, 0.575
Tocqueville; 0.587 / 0.575 on a later load). Both depend on the branch's places: each place
gives a book-wide paragraph cited by a summary sentence instead of a paragraph of the kept
sections. This prints, for the branch off and each (after, every) of `tune_fusion --grid
sentence`, what the default (auto, k 10) gives on both books, each half apart: overall and
paraphrase recall@5 and context precision, as `bookrag eval` computes them (evaluation.harness:
the same run_strategy, without the two-step search). A frontier, not a setting: nothing is
chosen here. Needs the books loaded.
    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/two_stage/precision_places.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest, embed_query
from evaluation.evalset import load_evalset
from evaluation.harness import run_strategy
from evaluation.metrics import aggregate
from evaluation.tune_fusion import SENTENCE_AFTER, SENTENCE_EVERY, SETS, half_of, table

BOOKS = ("bastiat", "tocqueville")


def main() -> None:
    settings = load_settings()
    places = [(None, 0)] + [(a, e) for a in SENTENCE_AFTER for e in SENTENCE_EVERY]
    items = [(n, it) for n in BOOKS for it in load_evalset(settings.home / SETS[n])]
    out: dict = {}
    with db.connect(db.database_url(settings)) as conn:
        vectors = [embed_query(conn, it.question) for _, it in items]
        for a, e in places:
            base = SearchRequest("", sentence_after=a, sentence_every=e)
            for (n, it), v in zip(items, vectors):
                r = run_strategy(conn, it, "auto", 10, it.book, v, 3000, base=base, two_step=False)
                for half in (half_of(it.id), "all"):
                    out.setdefault((a, e), {}).setdefault((n, half), []).append(r)
    rows = []
    for (a, e), by in out.items():
        name = "off" if e == 0 else f"after {a} every {e}" + (" (installed)" if (a, e) == (1, 3) else "")
        cells = []
        for n in BOOKS:
            for half in ("tune", "heldout", "all"):
                rs = by[(n, half)]
                agg = aggregate(rs, [5])
                p5 = aggregate([r for r in rs if r.kind == "paraphrase"], [5])["recall@5"]
                cells.append(f"{agg['recall@5']:.3f} / {p5:.3f} / {agg['context_precision']:.3f}")
        rows.append([name] + cells)
    print("recall@5 / paraphrase recall@5 / context precision")
    print(table(["places"] + [f"{n} {h}" for n in BOOKS for h in ("tuning", "held-out", "full")], rows))


if __name__ == "__main__":
    main()
