"""Document expansion with the summaries' anchored sentences. paraphrase_misses.py (two_stage/)
found that a reworded question's gold paragraph is cited by a summary sentence but is usually
not among stage 1's 100 rows: its own vector does not match the question. The sentence branch
scores a paragraph by its citing sentences *instead of* its text; here each paragraph is embedded
*with* them, as doc2query-style expansion does: input = heading path, the sentences citing the
paragraph, then its text (sentences before the text, so the model's 512-token window cuts the
text's tail, not them). Paragraphs no sentence cites keep their vector. Vector search alone over
the books' paragraphs (level 0, exact cosine in numpy), recall@5 / MRR@10 by question kind, on
one half of the two books' evalsets: the installed vectors, the expanded ones, and the max of
both. The expanded vectors are cached in .bookrag/experiments/ (about 6 minutes to embed).
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/doc_expansion.py tune|heldout
"""

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
from psycopg.rows import dict_row
from tqdm import tqdm

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query
from evaluation.evalset import KINDS, load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, table
from loader.embedding import LOCAL_MODEL, embedder_for_model

BOOKS = {"bastiat": "bastiat-sophismes-economiques", "tocqueville": "tocqueville-democratie-en-amerique"}


def main() -> None:
    half = sys.argv[1] if len(sys.argv) > 1 else "tune"
    settings = load_settings()
    cache = settings.home / ".bookrag" / "experiments" / "doc_expansion.npz"
    with db.connect(db.database_url(settings)) as conn:
        conn.row_factory = dict_row
        rows = conn.execute(
            "SELECT id, book, source_file, chunk_index, level, paragraph, parent_source_file, heading_path, "
            "content, content_token_count, embedding::text AS e FROM rag.hierarchical_content_nodes "
            "WHERE level = 0 AND book = ANY(%s) AND embedding_model = %s ORDER BY id",
            (list(BOOKS.values()), LOCAL_MODEL),
        ).fetchall()
        cites = defaultdict(list)
        for s in conn.execute(
            "SELECT cited_source_file AS f, cited_paragraphs AS ps, content FROM rag.sentences "
            "ORDER BY source_file, chunk_index, sentence_index"
        ).fetchall():
            for n in s["ps"]:
                cites[(s["f"], n)].append(s["content"])
        own = np.array([np.fromstring(r["e"].strip("[]"), sep=",") for r in rows], dtype=np.float32)
        ids = np.array([r["id"] for r in rows])
        if cache.exists() and np.array_equal(np.load(cache)["ids"], ids):
            expanded = np.load(cache)["vectors"]
        else:
            embedder = embedder_for_model(LOCAL_MODEL)
            expanded = own.copy()
            todo = [i for i, r in enumerate(rows) if cites.get((r["source_file"], r["paragraph"]))]
            for start in tqdm(range(0, len(todo), 16), unit="batch", desc="embedding"):
                batch = todo[start : start + 16]
                texts = [
                    f"{rows[i]['heading_path']}\n\n"
                    + " ".join(cites[(rows[i]["source_file"], rows[i]["paragraph"])])
                    + f"\n\n{rows[i]['content']}"
                    for i in batch
                ]
                expanded[batch] = embedder.passages(texts)
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cache, ids=ids, vectors=expanded)
        variants = {"installed vectors": own, "expanded vectors": expanded, "max of both": None}
        books = np.array([r["book"] for r in rows])
        results: dict[str, dict[str, dict[str, float]]] = {}
        for set_name, book in BOOKS.items():
            items = [i for i in load_evalset(settings.home / SETS[set_name]) if half_of(i.id) == half]
            mask = np.flatnonzero(books == book)
            for name, vecs in variants.items():
                by_kind = defaultdict(list)
                for it in items:
                    q = embed_query(conn, it.question)
                    if vecs is None:
                        sim = np.maximum(own[mask] @ q, expanded[mask] @ q)
                    else:
                        sim = vecs[mask] @ q
                    top = [rows[mask[j]] for j in np.argsort(-sim)[:10]]
                    r = score_question(it, name, top)
                    by_kind["all"].append(r)
                    by_kind[it.kind].append(r)
                for kind, res in by_kind.items():
                    results.setdefault(f"{name}", {})[f"{set_name} {kind}"] = aggregate(res, [1, 5, 10])
    cols = [f"{s} {k}" for s in BOOKS for k in ("all", *KINDS)]
    print(f"{half} half, vector search alone over the books' paragraphs: recall@5 / MRR@10\n")
    print(
        table(
            ["vectors", *cols],
            [
                [
                    name,
                    *(
                        f"{results[name][c]['recall@5']:.3f} / {results[name][c]['mrr@10']:.3f}"
                        f" ({int(results[name][c]['questions'])})"
                        for c in cols
                    ),
                ]
                for name in variants
            ],
        )
    )


if __name__ == "__main__":
    main()
