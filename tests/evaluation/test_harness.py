"""`bookrag eval` end to end on the fixture corpus: the real search path, real outputs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bookrag import db
from evaluation.evalset import load_evalset
from evaluation.harness import evaluate, table

EVALSET = Path(__file__).parents[1] / "fixtures" / "evals" / "traite-des-echanges.jsonl"


def test_evaluate_every_strategy(corpus):
    items = load_evalset(EVALSET)
    results = evaluate(
        corpus,
        items,
        ["bm25", "vector", "hybrid", "two-stage", "hybrid+parent", "context"],
        10,
        None,
        400,
        False,
    )
    by = {m: {r.id: r for r in res} for m, res in results.items()}
    assert by["bm25"]["traite-1"].answer_rank == 1  # lexical: BM25 finds it first
    assert by["bm25"]["traite-2"].answer_rank is None  # paraphrase: no shared word
    assert by["vector"]["traite-2"].node_rank is not None  # ... the vector branch finds its passage
    assert by["hybrid"]["traite-3"].node_rank is not None
    assert by["hybrid+parent"]["traite-1"].tokens_returned > by["hybrid"]["traite-1"].tokens_returned
    assert by["context"]["traite-1"].tokens_returned <= 400
    assert by["hybrid"]["traite-1"].chapter_rank is not None
    assert by["hybrid"]["traite-1"].two_step_rank is not None  # found again inside its chapter
    md, data = table(results, [1, 5])
    assert md.startswith("| mode | kind | n | recall@1 | recall@5 |")
    assert data["bm25"]["lexical"]["recall@1"] == 1.0
    assert {"chapter_recall@5", "two_step_recall@5", "paragraph_recall@5", "paragraph_mrr@10"} <= set(
        data["hybrid"]["all"]
    )
    assert {"two_step_recall@1", "two_step_mrr@10"} <= set(data["hybrid"]["all"]) and "two_step_mrr@10" in md
    assert data["hybrid"]["all"]["two_step_mrr@10"] > 0


def test_questions_no_hit_can_answer_are_named(corpus):
    from evaluation.harness import unreachable

    items = load_evalset(EVALSET)
    assert unreachable(corpus, items) == []
    # a fragment across two paragraphs (two chunks): the end of one, the start of the next
    end, start = corpus.execute(
        "SELECT right(a.content, 30), left(b.content, 30) FROM rag.hierarchical_content_nodes a "
        "JOIN rag.hierarchical_content_nodes b ON b.source_file = a.source_file AND b.chunk_index = a.chunk_index + 1 "
        "WHERE a.level = 0 ORDER BY a.id LIMIT 1"
    ).fetchone()
    across = replace(items[0], id="across", answers=(f"{end} {start}",))
    assert unreachable(corpus, [*items, across]) == ["across"]


def test_two_step_searches_within_the_top_chapter(corpus, e5):
    from evaluation.harness import run_strategy, top_chapter

    hits = [
        {"level": 2, "source_file": "p/summary.md", "parent_source_file": "b/summary.md"},
        {"level": 0, "source_file": "p/c/source.md", "parent_source_file": "p/c/summary.md"},
    ]
    assert top_chapter(hits) == "p/c/summary.md"
    item = load_evalset(EVALSET)[0]
    r = run_strategy(corpus, item, "hybrid-rrf", 10, None, e5.query(item.question), 3000)
    assert r.answer_rank == 1 and r.paragraph_rank == 1 and r.chapter_rank == 1 and r.two_step_rank == 1


def test_eval_cli_uses_a_scratch_database_and_writes_outputs(
    pg_url, corpus_home, tmp_path, monkeypatch, capsys
):
    from bookrag.cli import main

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("BOOKRAG_HOME", str(corpus_home))
    out = tmp_path / "out"
    assert (
        main(
            [
                "eval",
                "--evalset",
                str(EVALSET),
                "--modes",
                "bm25,hybrid",
                "--k",
                "1,5",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "scratch database: 13 inserted" in printed and "| bm25 | all | 3 |" in printed
    assert "warning:" not in printed
    data = json.loads((out / "eval-traite-des-echanges.json").read_text())
    assert set(data["results"]) == {"bm25", "hybrid"}
    assert (out / "eval-traite-des-echanges.png").read_bytes()[:4] == b"\x89PNG"
    c = db.connect(pg_url)
    assert c.execute("SELECT count(*) FROM rag.hierarchical_content_nodes").fetchone() == (
        0,
    )  # main tables untouched
    assert c.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'bookrag_eval_%'").fetchone() == (
        0,
    )  # cleaned up
    c.close()
