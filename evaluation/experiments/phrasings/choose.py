"""Which retrieval each phrasing goes through, and how the lists are fused (issue 32): every
combination on the tuning halves of both books' evalsets, then the chosen one and the
single-query default on the held-out halves.

For each question of evals/<book>.jsonl, its phrasings (evals/phrasings/<book>.jsonl, written by
a helper that saw only the questions) are searched with rag.search_phrasings in mode auto or
hybrid, fused by rrf or best, for each set of wordings of evaluation.harness.PHRASING_SETS; the
figure is recall@5 by answer (a top-5 hit contains an answer fragment), overall and by kind, on
the half given (evaluation.tune_fusion.half_of).

Run:  .venv/bin/python evaluation/experiments/phrasings/choose.py tune|heldout [--modes auto,hybrid]
      [--fusions rrf,best] [--sets question,keywords,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import SearchRequest
from evaluation.evalset import KINDS, load_evalset
from evaluation.harness import PHRASING_SETS, evaluate, load_phrasings
from evaluation.metrics import aggregate
from evaluation.tune_fusion import half_of

BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("half", choices=("tune", "heldout", "all"))
    ap.add_argument("--modes", default="auto,hybrid")
    ap.add_argument("--fusions", default="rrf,best")
    ap.add_argument("--sets", default=",".join(PHRASING_SETS))
    ap.add_argument("--json")
    args = ap.parse_args()
    settings = load_settings()
    conn = db.connect(db.database_url(settings))
    sets = args.sets.split(",")
    rows, data = [], {}
    for book in BOOKS:
        items = load_evalset(settings.home / "evals" / f"{book}.jsonl")
        items = [i for i in items if args.half == "all" or half_of(i.id) == args.half]
        phrasings = load_phrasings(settings.home / "evals" / "phrasings" / f"{book}.jsonl", items)
        for fusion in args.fusions.split(","):
            base = replace(SearchRequest(""), phrasing_fusion=fusion)
            results = evaluate(
                conn,
                items,
                args.modes.split(","),
                10,
                None,
                3000,
                False,
                base=base,
                two_step=False,
                phrasings=phrasings,
                sets=sets,
            )
            for name, res in results.items():
                key = f"{name} · {fusion}"
                cells = {"all": aggregate(res, [5])["recall@5"]}
                for kind in KINDS:
                    sub = [r for r in res if r.kind == kind]
                    cells[kind] = aggregate(sub, [5])["recall@5"] if sub else float("nan")
                data.setdefault(key, {})[book] = {**cells, "n": len(res)}
    print(f"recall@5 by answer, {args.half} half(s); per book: all / lexical / paraphrase / synthesis\n")
    print("| mode · wordings · fusion | mean of both books | " + " | ".join(BOOKS) + " |")
    print("|---|---|" + "---|" * len(BOOKS))
    for key, by_book in sorted(data.items(), key=lambda kv: -sum(b["all"] for b in kv[1].values())):
        mean = sum(b["all"] for b in by_book.values()) / len(by_book)
        cells = [
            f"{b['all']:.3f} / {b['lexical']:.3f} / {b['paraphrase']:.3f} / {b['synthesis']:.3f} (n {b['n']})"
            for b in (by_book[x] for x in BOOKS)
        ]
        print(f"| {key} | {mean:.3f} | " + " | ".join(cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
