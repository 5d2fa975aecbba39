"""Two ways to merge the sentence branch into the fused list, replayed on the same two lists.

  skip        (migrations 0008-0009) the branch's j-th paragraph *not in the fused top k* takes
              place after + 1 + (j - 1) * every; a paragraph both lists hold keeps its fused place.
  interleave  (migration 0010, as slots.py measured it) each place takes its list's next
              paragraph not placed yet (a fused row: not placed by the branch), so a paragraph
              both lists hold takes the better of its two places.

For each question of the chosen half: the fused top k (rag.search_hybrid) and the branch's 2k
paragraphs (rag.search_sentences) are read once, both merges computed here, and the installed
rag.search read as a check (it must equal one of them). Scored as `bookrag eval` scores
(evaluation.metrics). Needs the two books loaded; about 1 min.
    cd /work/main && .venv/bin/python evaluation/experiments/sentence_anchors/interleave.py tune|heldout|all
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from psycopg.rows import dict_row

from bookrag import db
from bookrag.config import load_settings
from bookrag.search import embed_query, vector_literal
from evaluation.evalset import load_evalset
from evaluation.metrics import aggregate, score_question
from evaluation.tune_fusion import half_of

HALF = sys.argv[1] if len(sys.argv) > 1 else "tune"
AFTER, EVERY, K = 1, 3, 10
BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")
COLS = "h.id, h.source_file, h.chunk_index, h.level, h.content, h.content_token_count, h.paragraph"


def key(h):
    return (h["source_file"], h["paragraph"]) if h["level"] == 0 else h["id"]


def skip(fused, branch):
    listed = {key(h) for h in fused}
    new = [s for s in branch if key(s) not in listed]
    keyed = [(i + 1, 0, h) for i, h in enumerate(fused)]
    keyed += [(AFTER + j * (EVERY - 1) + 0.5, j, s) for j, s in enumerate(new)]
    return [h for _, _, h in sorted(keyed, key=lambda t: (t[0], t[1]))][:K]


def interleave(fused, branch):
    queues = {"fused": list(fused), "branch": list(branch)}
    out, from_branch = [], []
    while len(out) < K and (queues["fused"] or queues["branch"]):
        n = len(out)
        turn = (
            "branch"
            if (queues["branch"] and n >= AFTER and (n - AFTER) % EVERY == 0) or not queues["fused"]
            else "fused"
        )
        taken = {key(h) for h in (out if turn == "branch" else from_branch)}
        queue = queues[turn]
        while queue and key(queue[0]) in taken:
            queue.pop(0)
        if queue:
            out.append(queue.pop(0))
            if turn == "branch":
                from_branch.append(out[-1])
    return out


def main() -> None:
    with db.connect(db.database_url(load_settings())) as conn:
        conn.row_factory = dict_row
        print(
            f"| {HALF if HALF == 'all' else HALF + ' half'} | questions | merge | recall@5 | MRR@10 | paraphrase recall@5 | installed = |"
        )
        print("|---|---|---|---|---|---|---|")
        for book in BOOKS:
            items = [
                i for i in load_evalset(Path(f"evals/{book}.jsonl")) if HALF == "all" or half_of(i.id) == HALF
            ]
            scored = {"skip": [], "interleave": []}
            installed = {"skip": 0, "interleave": 0}
            for it in items:
                v = vector_literal(embed_query(conn, it.question))
                fused = conn.execute(
                    f"SELECT {COLS} FROM rag.search_hybrid(%s, %s::vector, {K}, %s) h ORDER BY h.rank",
                    (it.question, v, book),
                ).fetchall()
                branch = conn.execute(
                    f"SELECT {COLS} FROM rag.search_sentences(%s::vector, {2 * K}, %s) h ORDER BY h.rank",
                    (v, book),
                ).fetchall()
                now = [
                    r["id"]
                    for r in conn.execute(
                        f"SELECT id FROM rag.search(%s, %s::vector, p_k => {K}, p_book => %s, p_sentence_after => {AFTER}, "
                        f"p_sentence_every => {EVERY})",
                        (it.question, v, book),
                    )
                ]
                for name, merge in (("skip", skip), ("interleave", interleave)):
                    hits = merge(fused, branch)
                    scored[name].append(score_question(it, name, hits))
                    installed[name] += [h["id"] for h in hits] == now
            for name, results in scored.items():
                a = aggregate(results, [5])
                para = [r for r in results if r.kind == "paraphrase"]
                print(
                    f"| {book.split('-')[0]} | {len(results)} | {name} | {a['recall@5']:.3f} | {a['mrr@10']:.3f} | "
                    f"{sum(r.recall(5) for r in para) / max(1, len(para)):.3f} | {installed[name]}/{len(results)} |"
                )


if __name__ == "__main__":  # chapter_prf.py imports the merge
    main()
