"""loader.frontmatter over python-frontmatter's YAML handler: a malformed head is one error naming
the file and the line (counting the opening '---' as line 1); the body is the end of the file, so
callers count its lines; render writes the fields in order, unwrapped, and reads back the same."""

from __future__ import annotations

import pytest

from bookrag.errors import BookragError
from loader import frontmatter


@pytest.mark.parametrize(
    "text,error",
    [
        ("# Titre\n\ntexte\n", "p.md:1: no YAML frontmatter (the file must start with a '---' line)"),
        ("---\nbook: b\ntitle: t\n", "p.md:1: frontmatter is not closed by a '---' line"),
        (
            "---\nbook: b\ntitle: t\nheading_path: a: b\n---\ntexte\n",
            "p.md:4: invalid YAML frontmatter: mapping values are not allowed here",
        ),
        (
            "---\nbook: b\n\ttitle: t\n---\ntexte\n",
            "p.md:3: invalid YAML frontmatter: found character '\\t' that cannot start any token",
        ),
        (  # an error at the head's end is on its last line, blank lines counted
            '---\n\n\nbook: b\ntitle: "t\n---\ntexte\n',
            "p.md:5: invalid YAML frontmatter: found unexpected end of stream",
        ),
        ("---\n- a\n- b\n---\ntexte\n", "p.md:2: frontmatter must be a mapping of fields"),
    ],
)
def test_a_malformed_head_names_the_file_and_line(text, error):
    with pytest.raises(BookragError) as err:
        frontmatter.split(text, "p.md")
    assert str(err.value) == error


def test_the_body_is_the_end_of_the_file():
    text = "---\nbook: b\ntitle: « Les routes »\n---\n\n\nPremier paragraphe.\n\nSecond.\n"
    meta, body = frontmatter.split(text, "p.md")
    assert meta == {"book": "b", "title": "« Les routes »"}
    assert body == "Premier paragraphe.\n\nSecond.\n" and text.endswith(body)
    assert text[: len(text) - len(body)].count("\n") + 1 == 7  # the line the body starts on


def test_render_keeps_the_order_and_reads_back():
    meta = {
        "title": " ".join(["Chapitre VII — Pétition des fabricants de chandelles"] * 4),  # never wrapped
        "level": 1,
        "embed": True,
        "book": "b",
        "heading_path": "Sophismes > Première série",
        "parent_source_file": None,
    }
    text = frontmatter.render(meta, "\n\nLe texte.  \n\n")
    assert text.startswith("---\ntitle: Chapitre VII — Pétition")  # unicode as written, first field first
    assert text.count("\n") == 9 and text.endswith("\n---\nLe texte.\n")
    assert list(frontmatter.split(text, "p.md")[0].items()) == list(meta.items())
    assert frontmatter.render(*frontmatter.split(text, "p.md")) == text


def test_reading_a_corpus_file_names_its_broken_line(home):
    path = home / "corpus/traite-des-echanges/avant-propos/summary.md"
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    lines[2] = "title: Avant-propos: le péage"  # the head's second field, line 3 of the file
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(BookragError) as err:
        frontmatter.read(path)
    assert str(err.value) == f"{path}:3: invalid YAML frontmatter: mapping values are not allowed here"
