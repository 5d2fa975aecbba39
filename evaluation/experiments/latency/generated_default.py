"""Does the generated default search (rag._install_model_search, migration 0015) give exactly the
general functions' rows on real questions? For every question of both halves of the two books'
evalsets and PIAF's (spread to PIAF_LIMIT per half, default 100), at k 1, 5, 10 and 30:
rag.search(q, e, p_k => k, p_expand => '{parent}') (the default, which runs the generated
function when it applies) against the same call with p_fusion => 'convex' (the default value,
which takes the general functions), every column compared; then how often the generated
function answered and how often it handed over to the general functions (no section, or no
paragraph of the kept sections, found), and how many ran two-stage's second search inside the
kept sections, from pg_stat_user_functions. Timing: bench/bench_search.py ("default+parent" against
"default+parent, general"). Needs the books (and PIAF) loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/latency/generated_default.py [PIAF_LIMIT]
"""

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tqdm import tqdm

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.tune_fusion import half_sets

DEFAULT = "SELECT * FROM rag.search(%(q)s, %(e)s, p_k => %(k)s, p_expand => '{parent}')"
GENERAL = "SELECT * FROM rag.search(%(q)s, %(e)s, p_k => %(k)s, p_expand => '{parent}', p_fusion => 'convex')"
KS = (1, 5, 10, 30)


def calls(conn, names: tuple[str, ...]) -> Counter:
    conn.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(0.2)
    with db.connect(conn.info.dsn, autocommit=True) as other:
        return Counter(
            dict(
                other.execute(
                    "SELECT funcname, calls FROM pg_stat_user_functions WHERE funcname = ANY(%s)",
                    (list(names),),
                ).fetchall()
            )
        )


def main() -> None:
    piaf_limit = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    settings = load_settings()
    with db.connect(db.database_url(settings), autocommit=True) as conn:
        conn.execute("SET track_functions = 'all'")
        fast = "_default_search"  # the corpus model's generated search (rag._install_model_search)
        names = (fast, "search_two_stage", "_search_in_sections")
        before = calls(conn, names)
        same: Counter = Counter()
        total: Counter = Counter()
        differ = []
        for half in ("tune", "heldout"):
            for set_name, items in half_sets(settings.home, half, piaf_limit).items():
                for it in tqdm(items, desc=f"{set_name} {half}", unit="q"):
                    e = vector_literal(embed_query(conn, it.question))
                    for k in KS:
                        p = {"q": it.question, "e": e, "k": k}
                        total[k] += 1
                        if conn.execute(DEFAULT, p).fetchall() == conn.execute(GENERAL, p).fetchall():
                            same[k] += 1
                        else:
                            differ.append((set_name, it.id, k))
        after = calls(conn, names)
    generated = after[fast] - before[fast]
    general = after["search_two_stage"] - before["search_two_stage"]
    # both paths run two-stage's second search inside the kept sections through
    # rag._search_in_sections (migration 0016): half its calls is the comparisons that ran it
    # (a hand-over after an empty second search calls it a third time; hand-overs are printed)
    second = (after["_search_in_sections"] - before["_search_in_sections"]) // 2
    print("k  | questions | same rows")
    for k in KS:
        print(f"{k:<2} | {total[k]:9} | {same[k]}")
    print(
        f"\ngenerated function called {generated} times; rag.search_two_stage {general} times "
        f"({general - sum(total.values())} of them the generated function's hand-overs); "
        f"the second search inside the kept sections ran in {second} of them"
    )
    if differ:
        print("differ:", differ[:20])


if __name__ == "__main__":
    main()
