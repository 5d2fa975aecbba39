"""How a passage is cited the way a scholar writes it, e.g.

    Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « Pétition des fabricants de chandelles », § 4

The one place this rule lives: built from the book's registry entry (`rag.books`: author, title,
year, volume, from its manifest) and the row's heading path (part, chapter number and title, front
matter) and paragraph. The CLI (`search`, `ask`, the demo) and the MCP tools all call it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from loader.detect import ORDINALS  # French ordinals as they open or close a part's heading (one list)

SUMMARY_SUFFIX = " (résumé)"
#: The row kind of a summary the extractive provider wrote (loader.author_summary.EXTRACTIVE),
#: and what its citation says instead of « résumé »: the author's sentences, chosen by a program;
#: a reader quotes the paragraphs it cites, never it (decision 0040).
EXTRACTIVE_KIND = "extractive_summary"
EXTRACTIVE_LABEL = "extraits choisis par programme (citer les paragraphes)"
ROMAN = ["", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"]
CHAPTER = re.compile(r"^Chapitre\s+([IVXLCDM]+|\d+)\.?(?:\s+\((.*)\))?$")
PARTICLES = {"de", "d'", "du", "von", "van", "der"}


@dataclass(frozen=True)
class BookMeta:
    author: str | None
    title: str | None
    year: int | None
    volume: str | None = None  # which volume of the work (rag.books.volume), after the title


def book_meta(conn: psycopg.Connection) -> dict[str, BookMeta]:
    """Every registered book's author, title, year and volume (one small query)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT book, author, title, year, volume FROM rag.books").fetchall()
    return {r["book"]: BookMeta(r["author"], r["title"], r["year"], r["volume"]) for r in rows}


def surname(author: str) -> str:
    """'Frédéric Bastiat' → 'Bastiat', 'Alexis de Tocqueville' → 'Tocqueville'."""
    words = [w for w in author.split() if w.lower() not in PARTICLES]
    return words[-1] if words else author


def _part(segment: str) -> str | None:
    """'Première série' → '1re série', 'Deuxième partie' → '2e partie', 'Livre deuxième' → 'livre II'."""
    words = segment.split()
    if len(words) != 2:
        return None
    first, second = words[0].lower(), words[1].lower()
    if first in ORDINALS:
        n = ORDINALS[first]
        suffix = ("re" if first.endswith(("ère", "ere")) else "er") if n == 1 else "e"
        return f"{n}{suffix} {second}"
    if second in ORDINALS and ORDINALS[second] < len(ROMAN):
        return f"{first} {ROMAN[ORDINALS[second]]}"
    return None


def _segment(segment: str) -> str:
    chapter = CHAPTER.match(segment)
    if chapter:
        number, title = chapter.groups()
        return f"ch. {number}, « {title} »" if title else f"ch. {number}"
    return _part(segment) or f"« {segment} »"


#: A chapter's text before its first section becomes a leading section titled "<chapter> (début)"
#: (decision 34); its citation says "début" rather than repeat the chapter's title.
START_SUFFIX = " (début)"
_START = "début"


def _leads(parent: str, segment: str) -> bool:
    if not segment.endswith(START_SUFFIX):
        return False
    title = segment[: -len(START_SUFFIX)]
    chapter = CHAPTER.match(parent)
    return title == parent or bool(chapter and title in (chapter.group(2), f"Chapitre {chapter.group(1)}"))


#: rag.paragraphs' kinds of a footnote paragraph (`[^2]: …`): the author's, unless the text marks it
#: as the editor's.
NOTE_KINDS = {"note": "note {}", "editor_note": "note {} de l'éditeur"}


def scholarly(
    meta: BookMeta | None,
    heading_path: str | None,
    paragraph: int | None,
    node_type: str = "source",
    kind: str | None = None,
    note: str | None = None,
) -> str:
    """The citation of one row. A summary (written by the project, not the author) says so:
    its § is the summary's own paragraph, not the book's. An extractive one (kind
    extractive_summary) says it is the author's sentences chosen by a program, to be quoted from
    the paragraphs it cites. A footnote says so before its § ("note 2", "note 2 de l'éditeur":
    kind and note from rag.paragraphs), so that nobody quotes an editor's note as the author."""
    path = heading_path or ""
    is_summary = node_type == "summary" or path.endswith(SUMMARY_SUFFIX)
    if path.endswith(SUMMARY_SUFFIX):
        path = path[: -len(SUMMARY_SUFFIX)]
    segments = path.split(" > ") if path else []
    title = (meta.title if meta and meta.title else None) or (segments[0] if segments else "?")
    head = f"*{title}*"
    if meta and meta.volume:
        head += f", {meta.volume}"
    if meta and meta.author:
        head = f"{surname(meta.author)}, {head}"
    if meta and meta.year:
        head += f" ({meta.year})"
    parts = [head]
    for prev, seg in zip(segments, segments[1:]):
        parts.append(_START if _leads(prev, seg) else _segment(seg))
    if kind == EXTRACTIVE_KIND:
        parts.append(EXTRACTIVE_LABEL)
    elif is_summary:
        parts.append("résumé")
    if kind in NOTE_KINDS and note:
        parts.append(NOTE_KINDS[kind].format(note))
    if paragraph:
        parts.append(f"§ {paragraph}")
    return ", ".join(parts)


def paragraph_marks(conn: psycopg.Connection, rows: list[dict[str, Any]]) -> None:
    """Each row with a paragraph gains, from rag.paragraphs (the one place they are computed),
    `part` and `parts` (which chunk of its paragraph it is: 1 of 2…), `kind` ('note' and
    'editor_note' for footnotes, as well as the stored 'text' / 'author_summary') and `note` (a
    footnote's label). One query for all the rows."""
    keyed = [r for r in rows if r.get("paragraph") and r.get("source_file")]
    if not keyed:
        return
    with conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(
            "SELECT source_file, chunk_index, part, parts, kind, note FROM rag.paragraphs "
            "WHERE source_file = ANY(%s) AND paragraph = ANY(%s)",
            (sorted({r["source_file"] for r in keyed}), sorted({r["paragraph"] for r in keyed})),
        ).fetchall()
    marks = {(m["source_file"], m["chunk_index"]): m for m in found}
    for r in keyed:
        m = marks.get((r["source_file"], r["chunk_index"]))
        if m is not None:
            r.update(part=m["part"], parts=m["parts"], kind=m["kind"], note=m["note"])


def part_label(row: dict[str, Any]) -> str | None:
    """'1/2' for the first of a paragraph's two chunks; None for a paragraph in one chunk."""
    parts = row.get("parts") or 1
    return f"{row['part']}/{parts}" if parts > 1 else None


def add_citations(conn: psycopg.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row (and each row it carries under parent / cited) gains `citation`, and the marks of
    paragraph_marks; rows are search hits or context rows (they have book, heading_path,
    paragraph, node_type)."""
    meta = book_meta(conn)
    every = [n for r in rows for n in [r, *(r.get("parent") or []), *(r.get("cited") or [])]]
    paragraph_marks(conn, every)

    for r in every:
        book = r.get("book") or (r["source_file"].split("/")[1] if r.get("source_file") else None)
        r["citation"] = scholarly(
            meta.get(book or ""),
            r.get("heading_path"),
            r.get("paragraph"),
            r.get("node_type", "source"),
            r.get("kind"),
            r.get("note"),
        )
    return rows
