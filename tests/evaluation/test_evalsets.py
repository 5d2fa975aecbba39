"""The team's evalsets: enough questions, spread over the books, the kinds in proportion, every
answer fragment really in its expected passage (inside one chunk), and paraphrase questions that share no content
word with the paragraph holding the answer."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from bookrag.config import DEFAULT_HOME
from evaluation.evalset import load_evalset
from evaluation.metrics import normalise
from loader import frontmatter
from loader.chunking import chunk_body, paragraphs
from loader.manifest import book_tree, find_book

EVALS = DEFAULT_HOME / "evals"
# the default chunking threshold (BOOKRAG_MAX_CHUNK_TOKENS); the load may also cut where the
# embedder's own input window binds, which this check does not model
MAX_CHUNK_TOKENS = 400
BOOKS = ("bastiat-sophismes-economiques", "tocqueville-democratie-en-amerique")
STOP = {
    "alors",
    "aussi",
    "autre",
    "autres",
    "avec",
    "avoir",
    "cela",
    "celle",
    "celles",
    "celui",
    "ceux",
    "cette",
    "chaque",
    "comme",
    "comment",
    "dans",
    "depuis",
    "donc",
    "elle",
    "elles",
    "entre",
    "etre",
    "fait",
    "faire",
    "leur",
    "leurs",
    "mais",
    "meme",
    "moins",
    "nous",
    "notre",
    "selon",
    "sans",
    "sera",
    "sont",
    "sous",
    "quand",
    "quel",
    "quelle",
    "quelles",
    "quels",
    "quelque",
    "quoi",
    "pour",
    "pourquoi",
    "plus",
    "peut",
    "faut",
    "tout",
    "tous",
    "toute",
    "toutes",
    "tres",
    "vers",
    "votre",
    "vous",
    "etait",
    "ainsi",
    "avait",
    "dont",
    "lors",
    "encore",
}


def fold(word: str) -> str:
    return unicodedata.normalize("NFKD", word.lower()).encode("ascii", "ignore").decode()


@pytest.mark.parametrize("slug", BOOKS)
def test_size_kinds_and_spread(slug):
    items = load_evalset(EVALS / f"{slug}.jsonl")
    kinds = Counter(i.kind for i in items)
    assert len(items) >= 30
    assert kinds["paraphrase"] / len(items) >= 0.30
    assert kinds["synthesis"] >= 5 and kinds["lexical"] >= 5
    book = find_book(DEFAULT_HOME / "corpus", slug)
    files = {n.source_file for n in book_tree(book)}
    parts = {p.slug for p in book.parts}
    asked = {f.split("/")[2] for i in items for f in i.expected_files}
    assert parts <= asked  # every part has questions
    for i in items:
        assert set(i.expected_files) <= files, i.id
        if i.kind == "synthesis":
            assert i.expected_files[0].endswith("summary.md"), i.id


@pytest.fixture(scope="module")
def prepared(prepared_home: Path) -> Path:
    return prepared_home


@pytest.mark.parametrize("slug", BOOKS)
def test_fragments_are_in_their_passage_and_paraphrases_share_no_word(slug, prepared):
    for item in load_evalset(EVALS / f"{slug}.jsonl"):
        source = next(f for f in item.expected_files if f.endswith("source.md"))
        body = frontmatter.read(prepared / source)[1]
        # What search returns is a chunk, and a long paragraph is cut into several: a fragment
        # across a cut can never be found (bastiat-007 and -023 were, until 2026-12-01).
        chunks = [c.text for c in chunk_body(body, MAX_CHUNK_TOKENS)]
        paras = paragraphs(body)
        for frag in item.answers:
            assert any(normalise(frag) in normalise(c) for c in chunks), (
                f"{item.id}: fragment not inside one chunk of {source}: {frag!r}"
            )
            holding = [p for p in paras if normalise(frag) in normalise(p)]
            if item.kind == "paraphrase":
                stems = {fold(w)[:5] for p in holding for w in re.findall(r"[^\W\d_]+", p)}
                words = [
                    fold(w)
                    for w in re.findall(r"[^\W\d_]+", item.question.replace("’", "'"))
                    if len(w) >= 4 and fold(w) not in STOP
                ]
                shared = [w for w in words if w[:5] in stems]
                assert not shared, f"{item.id}: shares {shared} with its paragraph"
