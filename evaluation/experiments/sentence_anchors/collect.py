"""Step 2a: embed every question, run today's searches once, cache everything to $TMPDIR/sentexp/runs.pkl.

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/sentence_anchors/collect.py

Per question: query vector; level-0 ranked lists (k=40, levels=[0], own book) for hybrid default,
vector, and hybrid with the existing chunk-level cite_weight (0.1..0.4); and the harness's
own figures for 'hybrid' and 'vector' (all levels, k=10, as `./run eval` measures them).
Also the level-0 rows of both books (source_file, paragraph, chunk_index, content).
"""

import pickle
import tempfile
from dataclasses import asdict
from pathlib import Path

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest, embed_query, search
from evaluation.evalset import load_evalset
from evaluation.harness import run_strategy

SETS = ["evals/bastiat-sophismes-economiques.jsonl", "evals/tocqueville-democratie-en-amerique.jsonl"]
conn = db.connect(db.database_url(load_settings()))
rows = conn.execute(
    "SELECT book, source_file, paragraph, chunk_index, content FROM rag.hierarchical_content_nodes "
    "WHERE level = 0 AND book = ANY(%s)",
    (["bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"],),
).fetchall()
SETTINGS = {"hybrid": {}, "vector": {"mode": "vector"}}
for cw in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
    SETTINGS[f"hybrid+cite{cw}"] = {"cite_weight": cw}
KEEP = ("source_file", "paragraph", "chunk_index", "level", "score", "content")
out = {"rows": rows, "items": []}
for s in SETS:
    for item in load_evalset(Path(s)):
        emb = embed_query(conn, item.question)
        rec = {"item": item, "qvec": emb, "lists": {}, "harness": {}}
        for name, kw in SETTINGS.items():
            hits = search(conn, SearchRequest(item.question, k=40, levels=[0], book=item.book, **kw), emb)
            rec["lists"][name] = [{k: h.get(k) for k in KEEP} for h in hits]
        for strat in ("hybrid", "vector"):
            r = run_strategy(conn, item, strat, 10, item.book, emb, 3000, None, None, two_step=False)
            rec["harness"][strat] = asdict(r)
        out["items"].append(rec)
    print(s, "done")
Path(str(Path(tempfile.gettempdir()) / "sentexp" / "runs.pkl")).write_bytes(pickle.dumps(out))
print(len(out["items"]), "questions,", len(rows), "level-0 rows")
