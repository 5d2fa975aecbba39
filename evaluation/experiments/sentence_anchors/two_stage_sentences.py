"""Two-stage search with the sentence branch's places (migration 0012) against two-stage alone
(`p_sentence_every => 0`, the mode before it), the default and the two branches, on one half of
the three evalsets, measured as evaluation.tune_fusion measures (recall@5 and MRR@10 on the
books, paragraph recall@5 and MRR@10 on PIAF; the mean of (recall@5 + MRR@10) / 2 over the sets).
Each question is searched inside its own book. Needs the books and PIAF loaded; the tuning half
takes about 1 min with --piaf-limit 600, the held-out half 3 to 4 min.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/two_stage_sentences.py tune|heldout [--piaf-limit N]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest, embed_query, search
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import SETS, half_of, measures, spread

SEARCHES = {"bm25": SearchRequest("", "bm25"), "vector": SearchRequest("", "vector"),
            "hybrid (default)": SearchRequest(""),
            "two-stage, sections only": SearchRequest("", "two-stage", sentence_every=0),
            "two-stage (with the sentence branch)": SearchRequest("", "two-stage")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    args = ap.parse_args()
    home = load_settings().home
    results: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in SEARCHES}
    with db.connect(db.database_url(load_settings())) as conn:
        for set_name, path in SETS.items():
            items = [i for i in load_evalset(home / path) if half_of(i.id) == args.half]
            if set_name == "piaf":
                items = spread(items, args.piaf_limit)
            scored: dict[str, list] = {name: [] for name in SEARCHES}
            for it in items:
                emb = embed_query(conn, it.question)
                for name, req in SEARCHES.items():
                    hits = search(conn, SearchRequest(it.question, req.mode, 10, it.book, sentence_every=req.sentence_every), emb)
                    scored[name].append(score_question(it, name, hits))
            for name, res in scored.items():
                results[name][f"{set_name} ({len(items)})"] = measures(set_name, aggregate(res, [1, 5, 10]))
    sets = list(next(iter(results.values())))
    print(f"| {args.half} half | " + " | ".join(f"{s} r@5 / MRR" for s in sets) + " | mean |")
    print("|---|" + "---|" * (len(sets) + 1))
    for name, per_set in results.items():
        mean = sum(sum(v) / 2 for v in per_set.values()) / len(per_set)
        print(f"| {name} | " + " | ".join(f"{r:.3f} / {m:.3f}" for r, m in per_set.values()) + f" | {mean:.4f} |")


if __name__ == "__main__":
    main()
