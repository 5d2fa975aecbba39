"""Replay: does a change of the search core return the same rows? `record` runs the questions of
both halves of the evalsets (PIAF's spread to --piaf-limit per half) through rag.search in every
mode and with the filters a user sets, and writes each call's rows (id, rank, score) to a JSON
file; `compare` reads two such files and names every call whose rows differ. The query vectors are
computed once and kept beside the output (.npz), so a replay after a migration sends the very same
vectors. Needs the books (and PIAF) loaded. docs/architecture.md prescribes it for ranking changes.

    .venv/bin/python -m evaluation.replay record .bookrag/replay-before.json
    .venv/bin/python -m evaluation.replay compare .bookrag/replay-before.json .bookrag/replay-after.json

Calls use only the arguments every version of rag.search takes by these names (p_query,
p_query_embedding, p_mode, p_k, p_book, p_levels), so one script serves both sides.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from psycopg.rows import tuple_row

from bookrag import db
from bookrag.config import Settings, load_settings
from bookrag.errors import BookragError
from bookrag.search import corpus_model, query_vectors, vector_literal
from evaluation.tune_fusion import SETS, half_sets

#: (name, mode, k, book filter?, levels)
CALLS: tuple[tuple[str, str, int, bool, list[int] | None], ...] = (
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

#: A replay: "<question key> <call name>" -> [[id, rank, score], ...]
Rows = dict[str, list[list[float]]]


@dataclass(frozen=True)
class Question:
    key: str  # "<set>/<item id>"
    book: str | None  # the book the question is about, for the calls that filter by book
    text: str


def questions(settings: Settings, books: set[str], piaf_limit: int = 100) -> list[Question]:
    """Every question of both halves of the evalsets, each with the loaded book its set is about."""
    out = []
    names = tuple(n for n in SETS if n != "piaf" or piaf_limit)  # --piaf-limit 0: the books alone
    for half in ("tune", "heldout"):
        for set_name, items in half_sets(settings.home, half, piaf_limit, names).items():
            book = next((b for b in books if set_name.startswith(b) or b.startswith(set_name)), None)
            out += [Question(f"{set_name}/{it.id}", book, it.question) for it in items]
    return out


def replay(conn: psycopg.Connection, qs: list[Question], vectors: np.ndarray) -> Rows:
    """The rows of every call of CALLS for every question, its query vector given."""
    rows: Rows = {}
    with conn.cursor(row_factory=tuple_row) as cur:
        for q, vec in zip(qs, vectors):
            for name, mode, k, by_book, levels in CALLS:
                params = {
                    "q": q.text,
                    "e": vector_literal(vec),
                    "mode": mode,
                    "k": k,
                    "book": q.book if by_book else None,
                    "levels": levels,
                }
                found = cur.execute(SQL, params).fetchall()
                rows[f"{q.key} {name}"] = [[i, r, round(s, 9)] for i, r, s in found]
    return rows


@dataclass(frozen=True)
class Differences:
    calls: int
    ids_differ: list[str]  # calls whose ids or ranks differ
    scores_differ: list[str]  # calls with the same rows in the same order but another score

    def lines(self, a: Rows, b: Rows) -> list[str]:
        by_call: dict[str, int] = {}
        for k in self.ids_differ:
            name = k.rsplit(" ", 1)[1]
            by_call[name] = by_call.get(name, 0) + 1
        out = [
            f"{self.calls} calls: {self.calls - len(self.ids_differ)} return the same rows in the same "
            f"order, {len(self.ids_differ)} differ; {len(self.scores_differ)} of the same have another score"
        ]
        out += [f"  {name:20} {n} differ" for name, n in sorted(by_call.items())]
        out += [
            f"  {k}: {[r[0] for r in a[k]]} -> {[r[0] for r in b.get(k, [])]}" for k in self.ids_differ[:20]
        ]
        return out


def differences(a: Rows, b: Rows) -> Differences:
    ids_differ = [k for k in a if [r[:2] for r in a[k]] != [r[:2] for r in b.get(k, [])]]
    scores_differ = [
        k for k in a if k not in ids_differ and any(abs(x[2] - y[2]) > 1e-6 for x, y in zip(a[k], b[k]))
    ]
    return Differences(len(a), ids_differ, scores_differ)


def record(path: Path, piaf_limit: int) -> None:
    settings = load_settings()
    cache = path.with_suffix(".npz")
    with db.connect(db.database_url(settings), autocommit=True) as conn:
        books = {b for (b,) in conn.execute("SELECT book FROM rag.books").fetchall()}
        qs = questions(settings, books, piaf_limit)
        if cache.exists():
            vectors = np.load(cache)["v"]
        else:
            model = corpus_model(conn)
            if model is None:
                raise BookragError("no book is loaded: run `bookrag demo` first")
            vectors = query_vectors(model[0], [q.text for q in qs])
            np.savez(cache, v=vectors)
        rows = replay(conn, qs, vectors)
    path.write_text(json.dumps(rows))
    print(f"{len(rows)} calls over {len(qs)} questions written to {path}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m evaluation.replay", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the calls and write their rows to PATH (JSON)")
    rec.add_argument("path", type=Path)
    rec.add_argument(
        "--piaf-limit",
        type=int,
        default=100,
        help="PIAF questions per half, spread (0: the books alone, PIAF not loaded)",
    )
    cmp = sub.add_parser("compare", help="name the calls whose rows differ between two recordings")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.command == "record":
        record(args.path, args.piaf_limit)
    else:
        a, b = json.loads(args.before.read_text()), json.loads(args.after.read_text())
        print("\n".join(differences(a, b).lines(a, b)))


if __name__ == "__main__":
    main()
