"""Retrieval metrics on what was really retrieved.

A hit "contains the answer" when one of the item's verbatim fragments occurs in its text after
normalisation (case, Unicode form, whitespace, apostrophes, dashes, footnote markers). A hit is
"on an expected node" when its source_file is one of the item's expected files. A hit is
relevant when either holds.

Agent-path and paragraph measures:
  paragraph rank  the first answer-bearing hit at level 0 (a source paragraph): summaries that
                  quote the answer do not count. PIAF's peers searched paragraphs, so this is
                  the figure set beside theirs.
  chapter rank    the first hit from an expected file's chapter, any level: a hit whose node
                  sits in the same section folder as an expected file (a chapter's source.md
                  and summary.md share one), i.e. the agent has found the right place.
  two-step rank   the answer's rank in a second search `within` the chapter of the first
                  search's best level-0/1 hit (rank filled in by the harness). Context precision is the share of returned tokens (hits and any
expanded context) that belong to relevant nodes: the expected files and the nodes of
answer-bearing hits.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from loader.anchors import strip_anchors

_APOS = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "`": "'", "«": '"', "»": '"', "“": '"', "”": '"'})
_DASHES = re.compile(r"\s*(?:--|[—–‒―])\s*")
_MARKERS = re.compile(r"\[\^?\d+\]|\[TN-[A-Z]+\]")


def normalise(text: str) -> str:
    """The text as an answer is looked for in it: anchors ([§12]), note calls and markers out,
    quotes, apostrophes and dashes made one, case and spaces folded."""
    text = unicodedata.normalize("NFKC", strip_anchors(text)).translate(_APOS)
    text = _MARKERS.sub("", text)
    text = _DASHES.sub(" - ", text)
    text = text.replace("_", "")
    return " ".join(text.lower().split())


def contains_answer(content: str, answers: Iterable[str]) -> bool:
    norm = normalise(content)
    return any(normalise(a) in norm for a in answers)


#: What a rank is counted by (QuestionResult.rank).
RankBy = Literal["answer", "node", "paragraph", "chapter", "two_step", "relevant"]


@dataclass
class QuestionResult:
    id: str
    kind: str
    mode: str
    answer_rank: int | None  # 1-based rank of the first hit containing an answer
    node_rank: int | None  # 1-based rank of the first hit on an expected node
    relevant: list[bool]  # per rank
    tokens_returned: int
    tokens_relevant: int
    paragraph_rank: int | None = None  # 1-based rank of the first level-0 hit containing an answer
    chapter_rank: int | None = None  # 1-based rank of the first hit from an expected file's chapter
    two_step_rank: int | None = None  # answer rank in the search within the top chapter (harness)

    def rank(self, by: RankBy) -> int | None:
        """The rank a measure counts: answer, node, paragraph, chapter, two_step, or relevant (the
        first hit that holds an answer or is on an expected node)."""
        return {
            "answer": self.answer_rank,
            "node": self.node_rank,
            "paragraph": self.paragraph_rank,
            "chapter": self.chapter_rank,
            "two_step": self.two_step_rank,
            "relevant": self.first_relevant,
        }[by]

    def recall(self, k: int, by: RankBy = "answer") -> float:
        r = self.rank(by)
        return 1.0 if r is not None and r <= k else 0.0

    @property
    def first_relevant(self) -> int | None:
        return next((i + 1 for i, rel in enumerate(self.relevant) if rel), None)

    def mrr(self, k: int = 10, by: RankBy = "relevant") -> float:
        r = self.rank(by)
        return 1.0 / r if r is not None and r <= k else 0.0

    def ndcg(self, k: int = 10) -> float:
        gains = self.relevant[:k]
        dcg = sum(1.0 / math.log2(i + 2) for i, g in enumerate(gains) if g)
        ideal = sum(1.0 / math.log2(i + 2) for i in range(max(1, min(k, sum(gains)))))
        return dcg / ideal

    @property
    def context_precision(self) -> float:
        return self.tokens_relevant / self.tokens_returned if self.tokens_returned else 0.0


def score_question(
    item: Any, mode: str, hits: list[dict[str, Any]], context: list[dict[str, Any]] | None = None
) -> QuestionResult:
    """Score one question's ranked hits; `context` are the rows returned beside them (expanded
    parents or a built context) for the token measures (default: the hits themselves)."""
    expected = set(item.expected_files)
    chapters = {chapter_of(f) for f in expected}
    answer_rank = node_rank = paragraph_rank = chapter_rank = None
    relevant = []
    answer_nodes = set()
    for i, h in enumerate(hits, start=1):
        has_answer = contains_answer(h["content"], item.answers)
        on_node = h["source_file"] in expected
        if has_answer:
            answer_nodes.add(h["source_file"])
            answer_rank = answer_rank or i
            if h.get("level", 0) == 0:
                paragraph_rank = paragraph_rank or i
        if on_node:
            node_rank = node_rank or i
        if chapter_of(h["source_file"]) in chapters:
            chapter_rank = chapter_rank or i
        relevant.append(has_answer or on_node)
    rows = context if context is not None else hits
    good = expected | answer_nodes
    seen = set()
    returned = useful = 0
    for r in rows:
        key = (r["source_file"], r["chunk_index"])
        if key in seen:
            continue
        seen.add(key)
        t = r.get("content_token_count") or 0
        returned += t
        if r["source_file"] in good or contains_answer(r["content"], item.answers):
            useful += t
    return QuestionResult(
        item.id,
        item.kind,
        mode,
        answer_rank,
        node_rank,
        relevant,
        returned,
        useful,
        paragraph_rank,
        chapter_rank,
    )


def chapter_of(source_file: str) -> str:
    """The section folder a node belongs to (a section's source.md and summary.md share it)."""
    return source_file.rsplit("/", 1)[0]


def aggregate(results: list[QuestionResult], ks: list[int]) -> dict[str, float]:
    n = len(results) or 1
    out = {f"recall@{k}": sum(r.recall(k) for r in results) / n for k in ks}
    out.update({f"node_recall@{k}": sum(r.recall(k, "node") for r in results) / n for k in ks})
    for by in ("paragraph", "chapter", "two_step"):
        out.update({f"{by}_recall@{k}": sum(r.recall(k, by) for r in results) / n for k in ks})
    out["paragraph_mrr@10"] = sum(r.mrr(10, "paragraph") for r in results) / n
    out["two_step_mrr@10"] = sum(r.mrr(10, "two_step") for r in results) / n
    out["mrr@10"] = sum(r.mrr(10) for r in results) / n
    out["answer_mrr@10"] = sum(r.mrr(10, "answer") for r in results) / n
    out["ndcg@10"] = sum(r.ndcg(10) for r in results) / n
    out["context_precision"] = sum(r.context_precision for r in results) / n
    out["tokens_per_question"] = sum(r.tokens_returned for r in results) / n
    out["questions"] = len(results)
    return out
