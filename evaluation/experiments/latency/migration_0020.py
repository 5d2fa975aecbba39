"""What migration 0020 and orjson take off the default search with parent expansion, on the books.

Migration 0020 (decision 29) changed three things without changing a row:
  - rag.search builds each parent's JSON once per distinct parent instead of once per hit;
  - the generated default search looks up the k sentence-branch paragraphs rag._interleave can
    read instead of 2k;
  - the generated search has one fixed name, rag._default_search, which rag._search_hits calls
    statically (until 0020: rag._default_search_<hash of the model>, looked up by name, after
    rag._check_search_args and rag._corpus_model, and run through EXECUTE);
and bookrag.db.configure decodes JSON with orjson instead of the standard library.

The script swaps the functions 0020 changed between their texts as migration 0019 left them
(read from the migrations, which never change; rag._model_search_name re-created for them, and
the model's search generated into its per-model name) and as installed (generated into
rag._default_search), and measures:
1. Same rows: every question of both halves of the two books' evalsets and the bench's 20
   French queries, at k 1, 5, 10 and 30, with '{parent}' and with '{parent,cited}', every
   column compared between the two states.
2. Time: the bench's 20 French queries, k 10, `bench/bench_search.py`'s statements (bm25,
   vector, default+parent), interleaved per call, from Python (execute + fetchall), in rounds
   alternating the two states; default+parent from a connection decoding JSON with the
   standard library and from one decoding it with orjson (each first in turn). p50 over all
   rounds per variant, and its ratio to p50(bm25) + p50(vector) of the same rounds (issue 10's
   bound: <= 1.3). Then the JSON decoding alone: the bytes of those calls' JSON columns decoded
   by json.loads and by orjson.loads, 50 times each (what psycopg's loader calls per value).
The installed state is put back at the end, whatever happens (the per-model function and
rag._model_search_name dropped). Needs the books loaded; writes function definitions (the
development database, never a reader's).
    cd /work/main && .venv/bin/python evaluation/experiments/latency/migration_0020.py [--rounds 6] [--calls 100]
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import orjson
import psycopg
import psycopg.types.json
from bench_search import STATEMENTS
from common import FRENCH_QUERIES, markdown_table
from tqdm import tqdm

from bookrag import db
from bookrag.config import load_settings
from bookrag.functions import FUNCTIONS_DIR, recorded_texts
from bookrag.search import embed_query, vector_literal
from evaluation.tune_fusion import half_sets

KS = (1, 5, 10, 30)
OLD = ("_model_search_name", "_install_model_search", "_search_hits", "search")  # in this order
NEW = ("_default_search", "_install_model_search", "_search_hits", "search")
BOOKS = ("bastiat", "tocqueville")
GENERATE = "SELECT rag._install_model_search(m.model, m.dimension) FROM rag.embedding_models m"
CLEAN = """DO $$ DECLARE f regprocedure; BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'rag'::regnamespace
             AND p.proname ~ '^_default_search_[0-9a-f]{12}$' OR p.oid = to_regprocedure('rag._model_search_name(text)')
    LOOP EXECUTE format('DROP FUNCTION %s', f); END LOOP; END $$"""


def install(conn: psycopg.Connection, state: str) -> None:
    """The functions as 0019 left them ('0019') or as installed ('0020'), the model's search generated again."""
    if state == "0019":
        old = recorded_texts(until="0019")
        for name in OLD:
            conn.execute(old[name])
        conn.execute(GENERATE)
    else:
        for name in NEW:
            conn.execute((FUNCTIONS_DIR / f"{name}.sql").read_text())
        conn.execute(GENERATE)
        conn.execute(CLEAN)


def rows(conn: psycopg.Connection, questions: list[tuple[str, str]]) -> list:
    out = []
    for q, e in tqdm(questions, desc="rows", unit="q"):
        for k in KS:
            for expand in ("{parent}", "{parent,cited}"):
                out.append(
                    conn.execute(
                        "SELECT * FROM rag.search(%s, %s, p_k => %s, p_expand => %s)", (q, e, k, expand)
                    ).fetchall()
                )
    return out


def timed(conn: psycopg.Connection, statement: str, p: dict) -> float:
    t0 = time.perf_counter()
    conn.execute(statement, p).fetchall()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--calls", type=int, default=100, help="timed calls per statement per round (after 20)")
    args = ap.parse_args()
    url = db.database_url(load_settings())
    with db.connect(url, autocommit=True) as conn, db.connect(url, autocommit=True) as plain:
        psycopg.types.json.set_json_loads(json.loads, plain)  # the standard library's decoder
        texts = list(FRENCH_QUERIES)
        for half in ("tune", "heldout"):
            for items in half_sets(load_settings().home, half, names=BOOKS).values():
                texts += [it.question for it in items]
        questions = [(q, vector_literal(embed_query(conn, q))) for q in texts]
        params = [{"q": q, "e": e, "k": 10} for q, e in questions[: len(FRENCH_QUERIES)]]
        samples: dict[str, list[float]] = {}
        try:
            install(conn, "0019")
            before = rows(conn, questions)
            install(conn, "0020")
            after = rows(conn, questions)
            same = sum(a == b for a, b in zip(before, after))
            print(f"same rows: {same} of {len(after)} calls\n")
            for _ in tqdm(range(args.rounds), desc="rounds"):
                for state in ("0019", "0020"):
                    install(conn, state)
                    for i in range(20 + args.calls):
                        p = params[i % len(params)]
                        row = {
                            "bm25": timed(conn, STATEMENTS["bm25"], p),
                            "vector": timed(conn, STATEMENTS["vector"], p),
                        }
                        decoders = [("json", plain), ("orjson", conn)]
                        for decoder, c in decoders[:: 1 if i % 2 else -1]:  # each first in turn
                            row[f"{state}, {decoder}"] = timed(c, STATEMENTS["default+parent"], p)
                        if i >= 20:
                            for key, ms in row.items():
                                samples.setdefault(key, []).append(ms)
            # the decoding alone: the JSON columns' bytes as the server sends them, each decoder on each
            payloads = [
                [
                    v.encode()
                    for r in conn.execute(
                        "SELECT cites::text, parent::text FROM rag.search("
                        "%(q)s, %(e)s, p_k => %(k)s, p_expand => '{parent}')",
                        p,
                    )
                    for v in r
                ]
                for p in params
            ]
            decode: dict[str, list[float]] = {"json": [], "orjson": []}
            for _ in range(50):
                for values in payloads:
                    for name, loads in (("json", json.loads), ("orjson", orjson.loads)):
                        t0 = time.perf_counter()
                        for v in values:
                            loads(v)
                        decode[name].append((time.perf_counter() - t0) * 1000)
        finally:
            install(conn, "0020")
    p50 = {key: statistics.median(v) for key, v in samples.items()}
    scans = p50["bm25"] + p50["vector"]
    print(
        f"bm25 p50 {p50['bm25']:.2f} ms, vector p50 {p50['vector']:.2f} ms ({len(samples['bm25'])} calls each)\n"
    )
    print(
        markdown_table(
            ["default+parent", "p50 ms", "ratio to bm25 + vector"],
            [
                [key, f"{p50[key]:.2f}", f"{p50[key] / scans:.2f}"]
                for key in ("0019, json", "0019, orjson", "0020, json", "0020, orjson")
            ],
        )
    )
    size = statistics.mean(sum(map(len, values)) for values in payloads)
    print(
        f"\nJSON decoding alone ({size / 1000:.1f} KB per call): json.loads {statistics.median(decode['json']):.3f} ms, "
        f"orjson.loads {statistics.median(decode['orjson']):.3f} ms p50 per call"
    )


if __name__ == "__main__":
    main()
