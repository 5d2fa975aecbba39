"""End notes (issue 36, loader.endnotes): a book whose notes follow its last chapter under
"NOTES.", each "(_A_) PAGE 25." and called from the text as "…(_A_).". `bookrag add` makes each
a section of a "Notes" part titled by the paragraphs that call it, `prepare` writes it, `check`
pairs calls and notes on the prepared corpus; bad input names the file and line.

The book is written here (a few hundred words of invented prose), not taken from shared/books.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bookrag.cli import main
from bookrag.config import Settings
from loader import endnotes, frontmatter
from loader.chunking import paragraphs
from loader.importers.gutenberg import prepare
from loader.manifest import find_book
from tests.loader.test_add import para

SLUG = "notes"


def book_text(call_b: str = "(_B_)", note_c: str = "(_C_) PAGE 30.") -> str:
    """Two chapters; chapter I calls note A in its 2nd paragraph, chapter II calls B in its 3rd
    and C in its 1st; the notes follow "NOTES.", then a table of contents."""
    return (
        "The Project "
        "Gutenberg EBook of Essai sur les ponts, by Jean Essai\n\n"
        "Title: Essai sur les ponts\n\nAuthor: Jean Essai\n\nRelease Date: May 1, 2026 [EBook #99998]\n\n"
        "Language: French\n\nCharacter set encoding: UTF-8\n\n"
        "*** START OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES PONTS ***\n\n\n"
        "ESSAI SUR LES PONTS\n\n\n\n"
        f"CHAPITRE PREMIER.\n\n    Des piles.\n\n\n{para(90)}\n\n{para(60)}\nsur la rivière(_A_).\n\n{para(70)}\n\n\n"
        f"CHAPITRE II.\n\n    Des arches.\n\n\n{para(50)} le pont(_C_) et\n{para(40)}\n\n{para(80)}\n\n"
        f"{para(30)}\nles péages{call_b}.\n\n{para(60)}\n\n\n\n"
        "NOTES.\n\n\n"
        f"(_A_) PAGE 12.\n\nLes piles du pont de pierre reposent sur des pieux de chêne.\n\n{para(40)}\n\n\n"
        f"(_B_) PAGE 21.\n\n{para(55)}\n\n\n"
        f"{note_c}\n\nLa voûte en plein cintre porte la chaussée et son parapet.\n\n\n\n"
        "TABLE DES MATIÈRES.\n\n"
        "    CHAPITRE PREMIER.--Des piles.                 1\n\n"
        "    CHAPITRE II.--Des arches.                     9\n\n"
        "    NOTES                                        20\n\n"
        "FIN DE LA TABLE.\n\n"
        "*** END OF THIS PROJECT "
        "GUTENBERG EBOOK ESSAI SUR LES PONTS ***\n"
    )


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    (tmp_path / "books" / "ponts").mkdir(parents=True)
    monkeypatch.setenv("BOOKRAG_HOME", str(home))
    monkeypatch.setenv("BOOKRAG_SOURCES", str(tmp_path / "books"))
    return home


def write_raw(home: Path, text: str) -> Path:
    raw = home.parent / "books" / "ponts" / "ponts.txt"
    raw.write_text(text, encoding="utf-8")
    return raw


def raw_line(raw: Path, needle: str) -> int:
    """The 1-based line of the raw file holding `needle` (first occurrence)."""
    return next(
        k for k, line in enumerate(raw.read_text(encoding="utf-8").split("\n"), start=1) if needle in line
    )


def body_paragraphs(home: Path, rel: str) -> list[str]:
    return paragraphs(frontmatter.read(home / rel)[1])


def test_find_reads_notes_and_calls() -> None:
    lines = book_text().split("\n")
    found = endnotes.find("ponts.txt", lines)
    assert found is not None and found.heading == "NOTES." and lines[found.heading_line] == "NOTES."
    assert [(n.label, n.page, n.start) for n in found.notes] == [
        ("A", 12, "(_A_) PAGE 12."),
        ("B", 21, "(_B_) PAGE 21."),
        ("C", 30, "(_C_) PAGE 30."),
    ]
    assert lines[found.end].startswith("TABLE DES MATIÈRES")
    assert [c.label for c in found.calls] == [
        "A",
        "C",
        "B",
    ]  # text order; the notes' own headings are not calls
    assert all(f"(_{c.label}_)" in lines[c.line] for c in found.calls)
    assert endnotes.raw_problems(found, "ponts.txt") == []
    assert endnotes.find("x.txt", ["NOTES.", "", "Rien ici.", ""]) is None  # a heading without notes after it


def test_add_makes_each_note_a_node_titled_by_its_calls(home: Path, capsys: pytest.CaptureFixture) -> None:
    raw = write_raw(home, book_text())
    assert main(["add", str(raw), "--slug", SLUG]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out  # the notes were "end matter" before issue 36
    assert f"  2  {'Notes':<68} line {raw_line(raw, 'NOTES.'):>6}" in out
    assert "warning" not in out  # nor a contents entry missing from the tree ("NOTES  20")
    assert "    1  Note A — Chapitre I, § 2 " in out and "    1  Note C — Chapitre II, § 1 " in out
    book = find_book(home / "corpus", SLUG)
    [notes] = [p for p in book.parts if p.slug == "notes"]
    assert (notes.title, notes.start, notes.end) == ("Notes", "NOTES.", "TABLE DES MATIÈRES.")
    assert [(s.slug, s.label, s.title, s.kind, s.start) for s in notes.sections] == [
        ("note-a", "Note A", "Chapitre I, § 2", "note", "(_A_) PAGE 12."),
        ("note-b", "Note B", "Chapitre II, § 3", "note", "(_B_) PAGE 21."),
        ("note-c", "Note C", "Chapitre II, § 1", "note", "(_C_) PAGE 30."),
    ]

    settings = Settings(
        home=home,
        database_url=None,
        sources=raw.parent.parent,
        embedder="local",
        embedding_model=None,
        max_chunk_tokens=400,
    )
    prepare(settings, book)
    base = f"corpus/{SLUG}"
    note_a = body_paragraphs(home, f"{base}/notes/note-a/source.md")
    assert note_a[0] == "Les piles du pont de pierre reposent sur des pieux de chêne." and len(note_a) == 2
    assert body_paragraphs(home, f"{base}/notes/note-c/source.md") == [
        "La voûte en plein cintre porte la chaussée et son parapet."
    ]  # the contents are not a note
    meta = frontmatter.read(home / f"{base}/notes/note-b/source.md")[0]
    assert meta["heading_path"] == "Essai sur les ponts > Notes > Note B (Chapitre II, § 3)"
    # the title's § is the paragraph of the prepared chapter that holds the call
    chapters = {s.label: s.slug for s in book.front_matter}
    for note in notes.sections:
        chapter, number = note.title.split(", § ")
        paras = body_paragraphs(home, f"{base}/{chapters[chapter]}/source.md")
        assert note.start[:5] in paras[int(number) - 1], note.slug  # "(_A_)"
    assert not any(
        "(_" in p for p in body_paragraphs(home, f"{base}/{chapters['Chapitre II']}/source.md")[3:]
    )

    # check pairs them on the prepared corpus (summaries by the extractive provider: no embedding)
    assert main(["summarize", SLUG, "--provider", "extractive"]) == 0
    capsys.readouterr()
    assert main(["check", SLUG]) == 0
    assert "0 problems" in capsys.readouterr().out
    chapter_2 = home / f"{base}/{chapters['Chapitre II']}/source.md"
    text = chapter_2.read_text(encoding="utf-8")
    chapter_2.write_text(text.replace("péages(_B_)", "péages(_E_)"), encoding="utf-8")
    call_line = next(
        k
        for k, line in enumerate(chapter_2.read_text(encoding="utf-8").split("\n"), start=1)
        if "(_E_)" in line
    )
    note_b = home / f"{base}/notes/note-b/source.md"
    note_line = note_b.read_text(encoding="utf-8").split("\n").index("---", 1) + 2  # its text's first line
    assert main(["check", SLUG]) == 1
    out = capsys.readouterr().out
    assert (
        f"{base}/{chapters['Chapitre II']}/source.md:{call_line}: calls note (_E_), which the notes do not hold\n"
        in out
    )
    assert f"{base}/notes/note-b/source.md:{note_line}: note (_B_) is never called in the text\n" in out
    assert "2 problems" in out


@pytest.mark.parametrize(
    "call_b, note_c, wanted",
    [
        (
            "(_D_)",
            "(_C_) PAGE 30.",
            [
                "{raw}:{call}: calls note (_D_), which the notes do not hold",
                "{raw}:{note_b}: note (_B_) is never called in the text",
            ],
        ),
        (
            "(_B_)",
            "(_B_) PAGE 30.",
            [
                "{raw}:{note_c}: note (_B_) is given twice (first at {raw}:{note_b})",
                "{raw}:{call_c}: calls note (_C_), which the notes do not hold",
            ],
        ),
    ],
)
def test_add_refuses_calls_and_notes_that_disagree(
    home: Path, capsys: pytest.CaptureFixture, call_b, note_c, wanted
) -> None:
    raw = write_raw(home, book_text(call_b, note_c))
    lines = {
        "call": raw_line(raw, f"péages{call_b}"),
        "note_b": raw_line(raw, "(_B_) PAGE 21."),
        "note_c": raw_line(raw, note_c),
        "call_c": raw_line(raw, "le pont(_C_)"),
    }
    assert main(["add", str(raw), "--slug", SLUG]) == 1
    err = capsys.readouterr().err
    assert f"its end notes and their calls disagree ({len(wanted)} problems)" in err
    for w in wanted:
        assert w.format(raw=raw, **lines) in err
    assert not (home / "corpus" / SLUG).exists()  # nothing written
