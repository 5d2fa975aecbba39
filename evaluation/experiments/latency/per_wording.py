"""Where the time of several wordings goes (issue 32): on a synthetic corpus built as
bench/bench_search.py builds it (a scratch database, dropped at the end), a copy of
rag._two_stage with a clock after each of its steps (installed under another name in that
database only) times one wording at k 10 (a search) against three wordings at k 20 (each
phrasing's list), step by step; then the sentence branch and rag._search_hits alone. Every
figure is ms per call, measured inside the server (a plpgsql loop over the bench's queries), so
no round trip is counted.

    .venv/bin/python evaluation/experiments/latency/per_wording.py --rows 100000   # ~6 min
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HOME = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(HOME), str(HOME / "bench")]

import bench_search as bs  # noqa: E402
import numpy as np  # noqa: E402

from bookrag import db  # noqa: E402
from bookrag.config import load_settings  # noqa: E402

STEPS = ("bm25", "split", "knn", "fuse", "sections", "para", "inside", "final")


def clocked_two_stage() -> str:
    """rag._two_stage's file as rag._two_stage_clocked, adding each step's time to a setting."""
    src = (HOME / "sql" / "functions" / "_two_stage.sql").read_text(encoding="utf-8")
    src = src.replace("FUNCTION rag._two_stage(", "FUNCTION rag._two_stage_clocked(")

    def mark(step: str) -> str:
        return (
            f"\n        PERFORM set_config('clock.{step}', (coalesce(nullif(current_setting('clock.{step}', true), ''), '0')"
            f"::float8 + extract(epoch from clock_timestamp() - t_) * 1000)::text, false); t_ := clock_timestamp();\n"
        )

    after = [
        ("    flat     rag.search_settings := p;\nBEGIN\n", None),
        ("INTO b_of, b_all FROM rag._bm25(p_queries, v_n, p_book, NULL, p_ids) x;\n", "bm25"),
        ("WHERE b_of[j] = w ORDER BY j);\n", "split"),
        (
            "v := ARRAY(SELECT c FROM rag._knn(p_model, v_vector, p.vector_pool, p_book, NULL, p_ids) c);\n        END IF;\n",
            "knn",
        ),
        ("WHERE f.rank <= v_n ORDER BY f.rank);\n", "fuse"),
        ("GROUP BY 1 ORDER BY best DESC, section LIMIT p.sections) t) s;\n", "sections"),
        ("WHERE h.lvl = 0 AND h.pf = ANY(v_files) ORDER BY h.rank);\n", "para"),
        (
            "            para := ARRAY(SELECT f FROM rag._fuse(b, v, p) f WHERE f.rank <= v_pool ORDER BY f.rank);\n",
            "inside",
        ),
        ("        ORDER BY x.r;\n", "final"),
    ]
    for anchor, step in after:
        if anchor not in src:
            raise SystemExit(
                f"sql/functions/_two_stage.sql changed: no {anchor.strip()[:60]!r}; update this script"
            )
        if step is None:
            src = src.replace(
                anchor,
                anchor.replace("BEGIN\n", "    t_       timestamptz := clock_timestamp();\nBEGIN\n"),
                1,
            )
        else:
            src = src.replace(anchor, anchor + mark(step), 1)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=20)
    args = ap.parse_args()
    settings = load_settings()
    rng = np.random.default_rng(42)
    words, freq = bs.vocabulary(db.database_url(settings), 4000, rng)
    with bs.scratch_database(settings, "perwording") as scratch:
        bs.build_corpus(scratch, args.rows, words, freq, rng, None)
        params = bs.with_phrasings(
            [
                {"q": q, "e": e, "k": bs.K, "m": bs.BENCH_MODEL}
                for q, e in bs.synthetic_queries(words, args.queries, rng)
            ]
        )
        with db.connect(scratch, autocommit=True) as conn:
            conn.execute(clocked_two_stage())
            conn.execute("CREATE TEMP TABLE w (i int, q text, e vector, ph text[], pe vector[])")
            for i, p in enumerate(params):
                conn.execute(
                    "INSERT INTO w VALUES (%s, %s, %s, %s, %s::vector[])",
                    (i, p["q"], p["e"], p["ph"], p["pe"]),
                )

            def per_call(expr: str, rounds: int = 3) -> float:
                best = []
                for _ in range(rounds):
                    conn.execute(f"""DO $$ DECLARE t0 timestamptz; x record; BEGIN
                        t0 := clock_timestamp();
                        FOR x IN SELECT * FROM w ORDER BY i LOOP PERFORM count(*) FROM {expr}; END LOOP;
                        PERFORM set_config('clock.total', (extract(epoch from clock_timestamp() - t0) * 1000
                                           / {len(params)})::text, false);
                    END $$""")
                    best.append(float(conn.execute("SELECT current_setting('clock.total')").fetchone()[0]))
                return min(best)

            model = f"'{bs.BENCH_MODEL}'"
            print(f"# {args.rows:,} synthetic rows, {len(params)} queries, ms per call inside the server\n")
            rows = []
            for label, qs, vs, k in (
                ("1 wording, k 10", "ARRAY[x.q]", "ARRAY[x.e]", 10),
                ("3 wordings, k 20", "ARRAY[x.q] || x.ph", "ARRAY[x.e] || x.pe", 20),
            ):
                for _ in range(2):  # the second round is reported: the first plans the copy's statements
                    for step in STEPS:
                        conn.execute(f"SELECT set_config('clock.{step}', '0', false)")
                    total = per_call(
                        f"rag._two_stage_clocked({qs}, {vs}, {model}, {k}, NULL, NULL, rag._settings(NULL))",
                        1,
                    )
                steps = [
                    float(conn.execute(f"SELECT current_setting('clock.{s}')").fetchone()[0]) / len(params)
                    for s in STEPS
                ]
                rows.append([label, round(total, 2), *(round(s, 2) for s in steps)])
            print(bs.markdown_table(["rag._two_stage", "total", *STEPS], rows))
            print()
            print(
                bs.markdown_table(
                    ["statement", "1 wording", "3 wordings"],
                    [
                        [
                            "rag._sentences, k 20",
                            round(per_call(f"rag._sentences({model}, ARRAY[x.e], 20, NULL, NULL)"), 2),
                            round(
                                per_call(f"rag._sentences({model}, ARRAY[x.e] || x.pe, 20, NULL, NULL)"), 2
                            ),
                        ],
                        [
                            "rag._search_hits, k 20",
                            round(
                                per_call(
                                    "rag._search_hits(ARRAY[x.q], ARRAY[x.e], 'auto', 20, NULL, NULL, "
                                    "NULL, NULL, NULL, NULL)"
                                ),
                                2,
                            ),
                            round(
                                per_call(
                                    "rag._search_hits(ARRAY[x.q] || x.ph, ARRAY[x.e] || x.pe, 'auto', 20, NULL, NULL, NULL, NULL, "
                                    "NULL, NULL)"
                                ),
                                2,
                            ),
                        ],
                        [
                            "rag.search / rag.search_phrasings, k 10, parents",
                            round(per_call("rag.search(x.q, x.e, p_k => 10, p_expand => '{parent}')"), 2),
                            round(
                                per_call(
                                    "rag.search_phrasings(x.q, x.e, x.ph, x.pe, p_k => 10, p_expand => '{parent}')"
                                ),
                                2,
                            ),
                        ],
                    ],
                )
            )


if __name__ == "__main__":
    main()
