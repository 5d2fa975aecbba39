"""The loop the two-stage replays share: every question of one half of the three evalsets,
embedded once, each variant's list scored as evaluation.tune_fusion scores it (PIAF at paragraph
level), one table printed."""

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from psycopg.rows import dict_row

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import EvalItem
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import half_sets, headers_for, rows_for, table

#: lists(conn, item, query vector literal) -> {variant name: its ranked rows}
Lists = Callable[[object, EvalItem, str], dict[str, list[dict]]]


def replay(names: list[str], lists: Lists) -> None:
    """Runs `lists` on the half named by argv[1] (tune|heldout; PIAF spread to argv[2] questions)
    and prints recall@5 / MRR@10 per set for each name, in that order."""
    half = sys.argv[1] if len(sys.argv) > 1 else "tune"
    if half not in ("tune", "heldout"):
        sys.exit(f"usage: {Path(sys.argv[0]).name} tune|heldout [PIAF_LIMIT]; got {half!r}")
    piaf_limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    settings = load_settings()
    results: dict[str, dict[str, dict[str, float]]] = {n: {} for n in names}
    with db.connect(db.database_url(settings)) as conn:
        conn.row_factory = dict_row
        for set_name, items in half_sets(settings.home, half, piaf_limit).items():
            scored: dict[str, list] = {n: [] for n in names}
            for it in items:
                listed = lists(conn, it, vector_literal(embed_query(conn, it.question)))
                for name in names:
                    scored[name].append(score_question(it, name, listed[name]))
            for name, res in scored.items():
                results[name][set_name] = aggregate(res, [1, 5, 10])
    print(
        f"{half} half: "
        + ", ".join(f"{n} {int(a['questions'])} questions" for n, a in results[names[0]].items())
        + "\n"
    )
    print(table(headers_for(results), rows_for(results, names)))
