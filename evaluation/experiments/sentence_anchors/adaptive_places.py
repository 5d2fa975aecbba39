"""Query-adaptive places for the sentence branch, on the tuning half only: per question, the
installed places (after 1, every 3) when BM25's best score in the question's book is at least
tau, a setting with more sentence places otherwise (weak lexical evidence = a reworded question:
on the tuning half BM25's top-1 score separates lexical from paraphrase questions, AUC 0.96).
Runs the real rag.search through tune_fusion's Runner; per-question results cached in $TMPDIR.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/adaptive_places.py"""

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db  # noqa: E402
from bookrag.config import load_settings  # noqa: E402
from evaluation.evalset import load_evalset  # noqa: E402
from evaluation.metrics import aggregate  # noqa: E402
from evaluation.tune_fusion import SETS, Runner, Setting, half_of  # noqa: E402

BOOKS = {n: SETS[n] for n in ("bastiat", "tocqueville")}
PLACES = {
    "installed 1/3": Setting("a", sentence_after=1, sentence_every=3),
    "0/2": Setting("b", sentence_after=0, sentence_every=2),
    "0/1": Setting("c", sentence_after=0, sentence_every=1),
    "1/2": Setting("d", sentence_after=1, sentence_every=2),
    "0/3": Setting("e", sentence_after=0, sentence_every=3),
}
TAUS = (float("inf"), 4, 6, 8, 10, 12, 14, 16, 18, 20, 25, 30)


def collect() -> tuple[dict, dict]:
    cache = (
        Path(tempfile.gettempdir())
        / f"adaptive_places_{hashlib.sha256(repr(PLACES).encode()).hexdigest()[:8]}.pkl"
    )
    if cache.exists():
        return pickle.loads(cache.read_bytes())
    conn = db.connect(db.database_url(load_settings()))
    runner, res, top = Runner(conn, False), {}, {}
    for n, f in BOOKS.items():
        items = [it for it in load_evalset(Path(f)) if half_of(it.id) == "tune"]
        for it in items:
            top[it.id] = conn.execute(
                "SELECT coalesce(max(score), 0) FROM rag.search_branch(%s, NULL, 'bm25', 1, %s)",
                (it.question, it.book),
            ).fetchone()[0]
            conn.rollback()
        res[n] = {
            "items": items,
            **{p: dict(zip((it.id for it in items), runner.run(items, s))) for p, s in PLACES.items()},
        }
    cache.write_bytes(pickle.dumps((res, top)))
    return res, top


def main() -> None:
    res, top = collect()
    measure = lambda qs: (lambda a: (a["recall@5"], a["mrr@10"]))(aggregate(qs, [1, 5, 10]))  # noqa: E731
    for heavy in [p for p in PLACES if p != "installed 1/3"]:
        for tau in TAUS:
            out = [
                measure(
                    [res[n][heavy if top[it.id] < tau else "installed 1/3"][it.id] for it in res[n]["items"]]
                )
                for n in BOOKS
            ]
            print(
                f"{heavy} below tau {tau:>4}: "
                + "  ".join(f"{n} {a:.3f}/{b:.3f}" for n, (a, b) in zip(BOOKS, out))
                + f"  mean {sum(a + b for a, b in out) / 4:.4f}"
            )


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parents[3])
    main()
