"""The sentence branch's places in two-stage, now the default's list (migration 0014). Its places
(after 1, every 3: places 2, 5, 8) were chosen for hybrid (decision 19) and kept for two-stage
(decision 21). Here the same grid as `evaluation.tune_fusion --grid sentence` (after 0-5 x every
1-4, and off) is run in mode two-stage through rag.search as installed, on one half of the three
evalsets (PIAF has no anchored summaries: the branch gives it nothing, so a spread of its
questions is enough), scored by evaluation.tune_fusion's runner.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/places.py tune|heldout [--piaf-limit N] [--only A,E ...]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bookrag import db
from bookrag.config import load_settings
from evaluation.tune_fusion import (
    SENTENCE_AFTER,
    SENTENCE_EVERY,
    Runner,
    Setting,
    evaluate_settings,
    half_sets,
    headers_for,
    measures,
    one_question,
    rows_for,
    table,
)


def grid(only: list[str] | None) -> list[Setting]:
    pairs = [(a, e) for a in SENTENCE_AFTER for e in SENTENCE_EVERY]
    if only:
        pairs = [tuple(int(x) for x in p.split(",")) for p in only]
    return [Setting("two-stage, sentences off", "two-stage", sentence_every=0)] + [
        Setting(
            f"two-stage after={a} every={e}" + (" (installed)" if (a, e) == (1, 3) else ""),
            "two-stage",
            sentence_after=a,
            sentence_every=e,
        )
        for a, e in pairs
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int, default=100)
    ap.add_argument("--only", nargs="*", help="after,every pairs, e.g. 1,3 0,2")
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit)
    candidates = grid(args.only)
    with db.connect(db.database_url(settings)) as conn:
        results = evaluate_settings(Runner(conn, progress=True), sets, candidates)
    print(
        f"{args.half} half: "
        + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items())
        + f"; one question of the smallest set moves the mean by {one_question(results):.3f}\n"
    )
    names = sorted((s.name for s in candidates), key=lambda n: -results_mean(results, n))
    print(table(headers_for(results), rows_for(results, names)))


def results_mean(results: dict, name: str) -> float:
    sets = results[name]
    return sum(sum(measures(n, agg)) / 2 for n, agg in sets.items()) / len(sets)


if __name__ == "__main__":
    main()
