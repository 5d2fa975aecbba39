"""Where the default (auto: two-stage) loses a reworded question's paragraph. For every
paraphrase question of the two books' full evalsets, one line: the answer's rank in the
default list (rag.search, k 10), whether stage 1 keeps the gold chapter among its 5 sections
(and its rank among the sections found), the gold paragraph's rank among the kept chapter's
paragraphs in stage 1's rows, whether a chapter-summary sentence cites it (rag.sentences), and
the rank of the best such sentence by similarity to the question, book-wide and inside the gold
chapter. Then the questions missed at 5, counted by the first place the path breaks, and the
ceiling of narrower anchors: the questions that would reach the top 5 if every summary sentence
cited only one paragraph (see the comment in main). A diagnosis, not a setting: nothing is
tuned here. Needs the books loaded.
    cd /work/main && .venv/bin/python evaluation/experiments/two_stage/paraphrase_misses.py
"""

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sentence_anchors"))
from one_search import ONE, sections
from psycopg.rows import dict_row
from stage_one import COLS

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import normalise, score_question
from evaluation.tune_fusion import SETS, table

SEARCH = f"SELECT {COLS} FROM rag.search(%s, %s::vector, p_k => 10, p_book => %s) h ORDER BY h.rank"
SENTENCES = (
    "SELECT s.source_file, s.cited_source_file AS f, s.cited_paragraphs AS ps, 1 - (s.embedding <=> %s::vector) AS sim "
    "FROM rag.sentences s WHERE s.book = %s ORDER BY sim DESC"
)


def main() -> None:
    settings = load_settings()
    lines, breaks, ceiling, totals = [], Counter(), Counter(), Counter()
    with db.connect(db.database_url(settings)) as conn:
        conn.row_factory = dict_row
        for set_name in ("bastiat", "tocqueville"):
            items = [i for i in load_evalset(settings.home / SETS[set_name]) if i.kind == "paraphrase"]
            paragraphs = conn.execute(
                "SELECT id, source_file, paragraph, parent_source_file, content FROM "
                "rag.hierarchical_content_nodes WHERE book = %s AND level = 0",
                (items[0].book,),
            ).fetchall()
            for it in items:
                answers = [normalise(a) for a in it.answers]
                gold = [p for p in paragraphs if any(a in normalise(p["content"]) for a in answers)]
                gold_keys = {(p["source_file"], p["paragraph"]) for p in gold}
                chapters = {p["parent_source_file"] for p in gold}
                v = vector_literal(embed_query(conn, it.question))
                rank = score_question(
                    it, "auto", conn.execute(SEARCH, (it.question, v, it.book)).fetchall()
                ).answer_rank
                rows = conn.execute(ONE.format(cols=COLS), (it.question, v, 100, it.book, 100)).fetchall()
                kept = sections(rows)
                found = sections(rows, keep=None)  # every section among the rows, best first
                order = sorted(found, key=lambda f: (-found[f], f))
                ch_rank = min((order.index(c) + 1 for c in chapters if c in found), default=None)
                in_ch = [r for r in rows if r["level"] == 0 and r["parent_source_file"] in chapters]
                p_rank = next(
                    (i + 1 for i, r in enumerate(in_ch) if (r["source_file"], r["paragraph"]) in gold_keys),
                    None,
                )
                sents = conn.execute(SENTENCES, (v, it.book)).fetchall()
                citing = [i for i, s in enumerate(sents) if any((s["f"], n) in gold_keys for n in s["ps"])]
                in_chapter = [s for s in sents if s["source_file"] in chapters]
                citing_in = [
                    i for i, s in enumerate(in_chapter) if any((s["f"], n) in gold_keys for n in s["ps"])
                ]
                s_rank = citing[0] + 1 if citing else None
                s_rank_in = citing_in[0] + 1 if citing_in else None
                if rank and rank <= 5:
                    where = "found"
                elif not gold:
                    where = "answer in no paragraph"
                elif not any(c in kept for c in chapters):
                    where = "stage 1 missed the chapter"
                elif not citing:
                    where = "chapter kept; no sentence cites the paragraph"
                elif s_rank_in and s_rank_in <= 2:
                    where = "chapter kept; a top-2 sentence of the chapter cites it"
                else:
                    where = "chapter kept; cited, but by a lower sentence of the chapter"
                breaks[(set_name, where)] += 1
                totals[set_name] += 1
                # Ceiling of narrower anchors (every sentence citing one paragraph, its rank unchanged):
                # the branch's first two paragraphs take places 2 and 5, so a book-wide top-2 citing
                # sentence would put the gold in the top 5; so might a place given to the best
                # sentence of each of the first 3 kept sections (section_sentences_places.py).
                kept_rank = ch_rank if any(c in kept for c in chapters) else None
                if (
                    where == "found"
                    or (s_rank and s_rank <= 2)
                    or (kept_rank and kept_rank <= 3 and s_rank_in == 1)
                ):
                    ceiling[set_name] += 1
                lines.append(
                    [
                        set_name,
                        it.id,
                        rank or "-",
                        "yes" if any(c in kept for c in chapters) else "no",
                        ch_rank or "-",
                        p_rank or "-",
                        len(citing),
                        s_rank or "-",
                        s_rank_in or "-",
                        where,
                    ]
                )
    print(
        table(
            [
                "set",
                "question",
                "answer rank",
                "chapter kept",
                "chapter rank",
                "paragraph rank in chapter rows",
                "sentences citing it",
                "best citing sentence, book",
                "… in its chapter",
                "path",
            ],
            lines,
        )
    )
    print()
    print(table(["set", "path", "questions"], [[s, w, n] for (s, w), n in sorted(breaks.items())]))
    print()
    print(
        table(
            [
                "set",
                "paraphrase questions",
                "found (recall@5)",
                "ceiling of one-paragraph anchors (recall@5)",
            ],
            [
                [
                    s,
                    totals[s],
                    f"{breaks[(s, 'found')]} ({breaks[(s, 'found')] / totals[s]:.3f})",
                    f"{ceiling[s]} ({ceiling[s] / totals[s]:.3f})",
                ]
                for s in sorted(totals)
            ],
        )
    )


if __name__ == "__main__":
    main()
