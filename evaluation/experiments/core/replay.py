"""Replay: does a change of the search core return the same rows? `record` runs every question of
both halves of the two books' evalsets and 200 of PIAF's (100 per half, spread) through
rag.search in every mode and with the filters a user sets, and writes each call's rows (id,
rank, score) to a JSON file; `compare` reads two such files and names every call whose rows
differ. The query vectors are computed once and kept beside the output (.npz), so a replay
after a migration sends the very same vectors. Needs the books (and PIAF) loaded.

    .venv/bin/python evaluation/experiments/core/replay.py record .bookrag/replay-before.json
    .venv/bin/python evaluation/experiments/core/replay.py compare .bookrag/replay-before.json .bookrag/replay-after.json

Calls use only the arguments every version of rag.search takes by these names (p_query,
p_query_embedding, p_mode, p_k, p_book, p_levels), so one script serves both sides.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
from tqdm import tqdm

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import corpus_model, query_vectors, vector_literal
from evaluation.tune_fusion import half_sets

#: (name, mode, k, book filter?, levels)
CALLS = (
    ("auto", "auto", 10, False, None),
    ("auto-k1", "auto", 1, False, None),
    ("auto-k30", "auto", 30, False, None),
    ("auto-book", "auto", 10, True, None),
    ("auto-summaries", "auto", 10, False, [1, 2, 3]),
    ("hybrid", "hybrid", 10, False, None),
    ("hybrid-book", "hybrid", 10, True, None),
    ("hybrid-paragraphs", "hybrid", 10, False, [0]),
    ("two-stage", "two-stage", 10, False, None),
    ("two-stage-book", "two-stage", 10, True, None),
    ("bm25", "bm25", 10, False, None),
    ("bm25-book", "bm25", 10, True, None),
    ("vector", "vector", 10, False, None),
    ("vector-levels", "vector", 10, False, [1]),
)
SQL = (
    "SELECT id, rank, score FROM rag.search(p_query => %(q)s, p_query_embedding => %(e)s::vector, "
    "p_mode => %(mode)s, p_k => %(k)s, p_book => %(book)s, p_levels => %(levels)s::int[]) ORDER BY rank"
)


def questions(settings) -> list[tuple[str, str, str]]:
    """(key, book, question) for every question replayed."""
    out = []
    for half in ("tune", "heldout"):
        for set_name, items in half_sets(settings.home, half, 100).items():
            out += [(f"{set_name}/{it.id}", set_name, it.question) for it in items]
    return out


def record(path: Path) -> None:
    settings = load_settings()
    qs = questions(settings)
    cache = path.with_suffix(".npz")
    with db.connect(db.database_url(settings), autocommit=True) as conn:
        if cache.exists():
            vectors = np.load(cache)["v"]
        else:
            vectors = query_vectors(corpus_model(conn)[0], [q for _, _, q in qs])
            np.savez(cache, v=vectors)
        books = {b for (b,) in conn.execute("SELECT book FROM rag.books").fetchall()}
        rows: dict[str, list] = {}
        for (key, set_name, q), vec in tqdm(list(zip(qs, vectors)), desc="replay", unit="q"):
            e = vector_literal(vec)
            book = next((b for b in books if set_name.startswith(b) or b.startswith(set_name)), None)
            for name, mode, k, by_book, levels in CALLS:
                p = {
                    "q": q,
                    "e": e,
                    "mode": mode,
                    "k": k,
                    "book": book if by_book else None,
                    "levels": levels,
                }
                rows[f"{key} {name}"] = [[i, r, round(s, 9)] for i, r, s in conn.execute(SQL, p).fetchall()]
    path.write_text(json.dumps(rows))
    print(f"{len(rows)} calls over {len(qs)} questions written to {path}")


def compare(before: Path, after: Path) -> None:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    ids_differ = [k for k in a if [r[:2] for r in a[k]] != [r[:2] for r in b.get(k, [])]]
    score_differ = [
        k for k in a if k not in ids_differ and any(abs(x[2] - y[2]) > 1e-6 for x, y in zip(a[k], b[k]))
    ]
    by_call: dict[str, int] = {}
    for k in ids_differ:
        by_call[k.rsplit(" ", 1)[1]] = by_call.get(k.rsplit(" ", 1)[1], 0) + 1
    print(
        f"{len(a)} calls: {len(a) - len(ids_differ)} return the same rows in the same order, "
        f"{len(ids_differ)} differ; {len(score_differ)} of the same have another score"
    )
    for name, n in sorted(by_call.items()):
        print(f"  {name:20} {n} differ")
    for k in ids_differ[:20]:
        print(f"  {k}: {[r[0] for r in a[k]]} -> {[r[0] for r in b[k]]}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(__doc__)
