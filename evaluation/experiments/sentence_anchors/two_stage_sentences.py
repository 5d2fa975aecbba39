"""Two-stage search with the sentence branch's places (migration 0012) against two-stage alone
(`p_sentence_every => 0`), the default and the two branches, on one half of the three evalsets,
run and scored by evaluation.tune_fusion's own runner (recall@5 and MRR@10 on the books,
paragraph recall@5 and MRR@10 on PIAF; the mean of (recall@5 + MRR@10) / 2 over the sets).
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
from evaluation.tune_fusion import (
    BRANCHES,
    Runner,
    Setting,
    evaluate_settings,
    half_sets,
    headers_for,
    rows_for,
    table,
)

SETTINGS = [
    *BRANCHES,
    Setting("hybrid (default)"),
    Setting("two-stage, sections only", "two-stage", sentence_every=0),
    Setting("two-stage (with the sentence branch)", "two-stage"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("half", choices=("tune", "heldout"))
    ap.add_argument("--piaf-limit", type=int)
    args = ap.parse_args()
    settings = load_settings()
    sets = half_sets(settings.home, args.half, args.piaf_limit)
    with db.connect(db.database_url(settings)) as conn:
        results = evaluate_settings(Runner(conn, progress=False), sets, SETTINGS)
    print(
        f"{args.half} half: " + ", ".join(f"{n} {len(items)} questions" for n, items in sets.items()) + "\n"
    )
    print(table(headers_for(results), rows_for(results, [s.name for s in SETTINGS])))


if __name__ == "__main__":
    main()
