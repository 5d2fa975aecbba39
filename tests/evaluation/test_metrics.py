"""Metrics computed by hand on small rankings."""

from __future__ import annotations

import math

import pytest

from evaluation.evalset import EvalItem
from evaluation.metrics import aggregate, contains_answer, normalise, score_question

ITEM = EvalItem("q1", "?", "lexical", ("corpus/b/a/source.md",), ("l'économie -- politique",))


def hit(source_file: str, content: str, tokens: int = 10, chunk: int = 0) -> dict:
    return {
        "source_file": source_file,
        "content": content,
        "content_token_count": tokens,
        "chunk_index": chunk,
    }


def test_normalise_case_whitespace_apostrophes_dashes_markers():
    assert (
        normalise("L’Économie —  politique[^3]")
        == normalise("l'économie -- politique")
        == "l'économie - politique"
    )
    assert contains_answer("Ainsi, L’ÉCONOMIE—politique est une science.", ["l'économie -- politique"])


def test_ranks_recall_mrr_ndcg():
    hits = [
        hit("corpus/b/x/source.md", "rien"),
        hit("corpus/b/y/source.md", "L'économie — politique!"),
        hit("corpus/b/a/source.md", "autre chose"),
    ]
    r = score_question(ITEM, "hybrid", hits)
    assert (r.answer_rank, r.node_rank, r.first_relevant) == (2, 3, 2)
    assert (r.recall(1), r.recall(2), r.recall(2, "node"), r.recall(3, "node")) == (0.0, 1.0, 0.0, 1.0)
    assert r.mrr() == 0.5
    ideal = 1 + 1 / math.log2(3)
    assert r.ndcg() == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)


def test_context_precision_counts_tokens_of_relevant_nodes_once():
    hits = [hit("corpus/b/a/source.md", "x", 30), hit("corpus/b/z/source.md", "y", 70)]
    context = hits + [hit("corpus/b/a/source.md", "x", 30)]  # a duplicate row counts once
    r = score_question(ITEM, "hybrid+parent", hits, context)
    assert (r.tokens_returned, r.tokens_relevant, r.context_precision) == (100, 30, 0.3)


def test_aggregate_means():
    a = score_question(ITEM, "m", [hit("corpus/b/a/source.md", "l'économie -- politique")])
    b = score_question(ITEM, "m", [hit("corpus/b/q/source.md", "non")])
    agg = aggregate([a, b], [1])
    assert (
        agg["recall@1"] == 0.5
        and agg["mrr@10"] == 0.5
        and agg["answer_mrr@10"] == 0.5
        and agg["questions"] == 2
    )


def test_paragraph_and_chapter_ranks():
    """A summary quoting the answer is not a paragraph hit; a hit anywhere in the expected
    chapter's folder is a chapter hit."""
    summary = {**hit("corpus/b/a/summary.md", "l'économie -- politique"), "level": 1}
    para = {**hit("corpus/b/a/source.md", "l'économie -- politique"), "level": 0}
    r = score_question(ITEM, "hybrid", [hit("corpus/b/x/source.md", "rien"), summary, para])
    assert (r.answer_rank, r.paragraph_rank, r.chapter_rank) == (2, 3, 2)
    assert (
        r.recall(2, "paragraph") == 0.0
        and r.recall(3, "paragraph") == 1.0
        and r.mrr(10, "paragraph") == 1 / 3
    )
    agg = aggregate([r], [1, 5])
    assert (
        agg["paragraph_recall@5"] == 1.0
        and agg["chapter_recall@1"] == 0.0
        and agg["two_step_recall@5"] == 0.0
    )


def test_two_step_measures():
    """The second search's answer rank gives two-step recall@k and MRR@10; none counts as missed."""
    found = score_question(ITEM, "hybrid", [hit("corpus/b/x/source.md", "rien")])
    found.two_step_rank = 2
    missed = score_question(ITEM, "hybrid", [hit("corpus/b/x/source.md", "rien")])
    agg = aggregate([found, missed], [1, 5])
    assert (agg["two_step_recall@1"], agg["two_step_recall@5"], agg["two_step_mrr@10"]) == (0.0, 0.5, 0.25)
    assert found.mrr(10, "two_step") == 0.5 and found.mrr(1, "two_step") == 0.0
