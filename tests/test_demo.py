"""`bookrag demo`'s printed output, line by line (the seconds masked), on the small Gutenberg-style
book written for tests/loader/test_add.py: a fresh database, summaries written here (one
anchored sentence each) and only the summaries embedded, so the run stays short."""

from __future__ import annotations

import re
from pathlib import Path

from bookrag.cli import main
from loader import frontmatter
from loader.manifest import book_tree, find_book
from loader.summarize import summary_meta
from tests.loader.test_add import small_book

QUESTION = "Qui paie le péage du pont ?"
#: An answer's citation line: "[n] heading path — source file §p, chunk i  (hit|context, level l)".
CITATION = (
    r"\[\d+\] Essai sur les routes( > [^—]+)? — corpus/essai/[a-z0-9/-]*(source|summary)\.md §\d+, chunk \d+  "
    r"\((hit|context), level [0-3]\)"
)


def write_summaries(home: Path) -> None:
    book = find_book(home / "corpus", "essai")
    for node in book_tree(book):
        if node.node_type == "summary":
            anchor = " [§1]" if node.level == 1 else ""
            meta = summary_meta(
                book,
                node,
                generator="team",
                model=None,
                algorithm="bottom-up",
                template="",
                template_hash="",
                inputs_hash="",
            )
            body = (
                f"{node.title} : le voyageur y pèse le prix du péage et de l'entretien de la route{anchor}."
            )
            frontmatter.write_atomic(home / node.source_file, frontmatter.render(meta, body))


def test_demo_prints_each_stage_then_the_answers(tmp_path, pg_url, monkeypatch, capsys):
    home, books = tmp_path / "home", tmp_path / "books"
    raw = books / "essai" / "essai.txt"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(small_book(gap=False).encode("utf-8"))
    (home / "corpus").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.setenv("BOOKRAG_SOURCES", str(books))
    monkeypatch.setenv("DATABASE_URL", pg_url)
    for name in (
        "BOOKRAG_LLM_MODEL",
        "BOOKRAG_EMBEDDER",
        "BOOKRAG_EMBEDDING_MODEL",
        "BOOKRAG_MAX_CHUNK_TOKENS",
    ):
        monkeypatch.delenv(name, raising=False)
    assert main(["add", str(raw), "--slug", "essai", "--year", "1900"]) == 0
    manifest = home / "corpus" / "essai" / "book.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace('policy = "all"', 'policy = "summaries-only"'),
        encoding="utf-8",
    )
    write_summaries(home)
    capsys.readouterr()

    assert main(["demo", "--question", QUESTION]) == 0
    out, _ = capsys.readouterr()
    stages, answer = out.split("\n\n", 1)
    assert re.sub(r"ready in \d+\.\d s$", "ready in … s", stages) == "\n".join(
        [
            "prepare  essai: 5 source files",
            "check    1 book, 13 files checked, 0 problems",
            "paragraphs cited by a summary anchor: essai 5/13 (38 %)",
            "sidecars 13 written, 0 unchanged, 8 chunks and 5 summary sentences embedded",
            "load     13 inserted, 0 replaced, 0 unchanged, 0 removed (21 rows written; books: essai)",
            "ready in … s",
        ]
    )
    # the answer is `bookrag ask`'s, word for word, then a blank line
    assert main(["ask", QUESTION]) == 0
    assert answer == capsys.readouterr().out + "\n"
    lines = answer.splitlines()
    assert lines[:4] == [
        f"Question : {QUESTION}",
        "",
        "(No LLM configured: the answer is the cited passages, in "
        "reading order; set BOOKRAG_LLM_MODEL and OPENAI_BASE_URL for a written answer.)",
        "",
    ]
    citations = [line for line in lines[4:-1] if not line.startswith("    ")]
    assert lines[-1] == "" and citations and all(re.fullmatch(CITATION, line) for line in citations), (
        citations
    )
    assert {re.fullmatch(CITATION, line)[3] for line in citations} == {"hit", "context"}
    # a second run finds everything in place
    assert main(["demo", "--question", QUESTION]) == 0
    assert capsys.readouterr().out.split("\n\n", 1)[0].splitlines()[3:5] == [
        "sidecars 0 written, 13 unchanged, 0 chunks embedded",
        "load     0 inserted, 0 replaced, 13 unchanged, 0 removed (0 rows written; books: essai)",
    ]
