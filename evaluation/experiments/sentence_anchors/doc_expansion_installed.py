"""doc_expansion.py's expanded paragraph vectors inside the whole search: the default (auto:
two-stage) and hybrid through rag.search as installed, on both halves of the three evalsets,
before and after the books' paragraph vectors are replaced by the expanded ones (heading path +
the summary sentences citing the paragraph + its text). The replacement is committed (the
search path ends a transaction after each search) and undone at the end whatever happens: the
installed vectors are read first and written back (also saved beside the cache); the HNSW
graph is not restored (UPDATEs add entries), so approximate results may move by a question. Run
doc_expansion.py first (it embeds and caches the expanded vectors). PIAF's vectors are not
touched (no anchored sentences), so a spread of its questions is enough.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/doc_expansion_installed.py [--piaf-limit N]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np

from bookrag import db
from bookrag.config import load_settings
from evaluation.tune_fusion import Runner, Setting, evaluate_settings, half_sets, headers_for, rows_for, table

SETTINGS = [Setting("auto (default)", "auto"), Setting("hybrid", "hybrid")]


def write(conn, ids: np.ndarray, vectors: np.ndarray) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE rag.hierarchical_content_nodes SET embedding = %s WHERE id = %s",
            [(v, int(i)) for i, v in zip(ids, vectors)],
        )
    conn.commit()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--piaf-limit", type=int, default=200)
    args = ap.parse_args()
    settings = load_settings()
    cache = settings.home / ".bookrag" / "experiments" / "doc_expansion.npz"
    ids, expanded = np.load(cache)["ids"], np.load(cache)["vectors"]
    halves = {half: half_sets(settings.home, half, args.piaf_limit) for half in ("tune", "heldout")}
    results = {}
    with db.connect(db.database_url(settings)) as conn, db.connect(db.database_url(settings)) as writer:
        db.register_vector(writer)
        rows = writer.execute(
            "SELECT id, embedding FROM rag.hierarchical_content_nodes WHERE id = ANY(%s) ORDER BY id",
            ([int(i) for i in ids],),
        ).fetchall()
        writer.commit()
        assert [r[0] for r in rows] == [int(i) for i in ids], (
            "the books were reloaded since doc_expansion.py ran"
        )
        installed = np.array([np.asarray(r[1].to_numpy(), dtype=np.float32) for r in rows])
        np.savez(cache.with_name("doc_expansion_backup.npz"), ids=ids, vectors=installed)
        runner = Runner(conn, progress=False)
        for label in ("installed", "expanded"):
            if label == "expanded":
                write(writer, ids, expanded)
            try:
                for half, sets in halves.items():
                    out = evaluate_settings(runner, sets, SETTINGS)
                    for name, agg in out.items():
                        results.setdefault(half, {})[f"{name}, {label} vectors"] = agg
            finally:
                if label == "expanded":
                    write(writer, ids, installed)
    for half, res in results.items():
        print(f"\n{half} half\n")
        print(table(headers_for(res), rows_for(res, list(res))))


if __name__ == "__main__":
    main()
