"""What the reading room's pages show, read through the rag.* functions (rag.list_books,
rag.outline, rag.get_node, rag.cites; the sentences of chapter summaries from rag.sentences,
which the reader role may read): plain data the templates lay out, no HTTP here.

A page is a folder of the corpus: the book's (its tree), a part's (its subtree), a chapter's
(its summary, each sentence's anchor a link highlighting the paragraphs it cites, and its
paragraphs numbered § as citations number them)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
from markupsafe import Markup
from psycopg.rows import dict_row

from bookrag.cite import EXTRACTIVE_KIND
from bookrag.links import citation_url, compress, page_path, split_source_file
from mcp_server import room_text

MAX_HIGHLIGHT_CHARS = 200
HIGHLIGHT = re.compile(r"\d{1,6}(?:-\d{1,6})?(?:,\d{1,6}(?:-\d{1,6})?)*")
MAX_HIGHLIGHTED = 200  # paragraphs one link may highlight
SEGMENT = re.compile(r"[\w.-]{1,200}")


class PageError(Exception):
    """A page that cannot be shown: an HTTP status and one sentence for the reader."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Anchor:
    label: str  # '§4–7', or a cited child's title
    url: str


@dataclass
class Sentence:
    id: str
    text: Markup
    anchors: list[Anchor]


@dataclass
class SummaryParagraph:
    number: int  # its paragraph in summary.md (the `#summary-N` of citation URLs)
    sentences: list[Sentence]


@dataclass
class Entry:
    """A node of a book's tree: the book, a part, or a section (chapter or front matter)."""

    folder: str  # below the book folder; '' for the book itself
    title: str
    level: int
    url: str
    is_section: bool  # it has its own text (source.md): a chapter page
    summary: list[SummaryParagraph] = field(default_factory=list)
    children: list[Entry] = field(default_factory=list)
    extractive: bool = False  # its summary is the author's sentences chosen by a program


@dataclass
class Paragraph:
    number: int
    html: Markup
    is_note: bool
    highlighted: bool
    cited_by: list[str]  # ids of the summary sentences citing it
    author: bool = False  # the author's own summary of the section (kind author_summary)
    scholarly: Markup = Markup("")  # the citation a scholar writes (bookrag.cite), the hit's lead
    editor_note: bool = False  # a footnote the text marks as the editor's (rag.paragraphs' kind)


@dataclass
class Link:
    title: str
    url: str


@dataclass
class ChapterPage:
    book: str
    book_title: str
    title: str
    heading_path: str
    source_file: str
    summary: list[SummaryParagraph]
    paragraphs: list[Paragraph]
    highlighted: str  # '§4–7' when a link asked for them, else ''
    trail: list[Link]  # the book, then the part
    previous: Link | None
    next: Link | None
    summary_extractive: bool = False  # the summary is the author's sentences chosen by a program


@dataclass
class TreePage:
    book: str
    book_title: str
    root: Entry
    trail: list[Link]


# --- input -------------------------------------------------------------------------------


def check_folder(book: str, folder: str) -> None:
    """A book slug and a folder below it, segment by segment: no empty, `.` or `..` segment, no
    absolute path, nothing but letters, digits, `.`, `_` and `-`."""
    for segment in [book, *(folder.split("/") if folder else [])]:
        if segment in (".", "..") or not SEGMENT.fullmatch(segment):
            path = f"/books/{book}/{folder}".rstrip("/")
            raise PageError(
                404,
                f"{path[:200]!r} is not a page of the reading room: its pages are "
                "/books/<book>/<part>/<chapter>, without '..', '.' or empty parts",
            )


def parse_highlight(raw: str | None) -> list[int]:
    """The paragraphs `hl` asks to highlight ('4-7,9'), or [] without it."""
    if raw is None or raw == "":
        return []
    if len(raw) > MAX_HIGHLIGHT_CHARS or not HIGHLIGHT.fullmatch(raw):
        raise PageError(400, f"hl={raw[:40]!r} is not a list of paragraph numbers like 4-7,9")
    numbers: set[int] = set()
    for part in raw.split(","):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        if lo < 1 or hi < lo:
            raise PageError(400, f"hl: {part!r} is not a forward range of paragraphs from §1")
        numbers.update(range(lo, min(hi, lo + MAX_HIGHLIGHTED) + 1))
        if len(numbers) > MAX_HIGHLIGHTED:
            raise PageError(400, f"hl asks for more than {MAX_HIGHLIGHTED} paragraphs; cite fewer")
    return sorted(numbers)


def section_label(paragraphs: list[int]) -> str:
    """'§18, §20–22' for [18, 20, 21, 22], as the summaries' anchors write it."""
    return ", ".join("§" + run.replace("-", "–") for run in compress(paragraphs).split(","))


# --- reading -----------------------------------------------------------------------------


def _rows(conn: psycopg.Connection, query: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def list_books(conn: psycopg.Connection) -> list[dict[str, Any]]:
    return [{**b, "url": page_path(b["book"])} for b in _rows(conn, "SELECT * FROM rag.list_books()", ())]


def _title(heading_path: str | None, fallback: str) -> str:
    last = (heading_path or fallback).rsplit(" > ", 1)[-1]
    return last.removesuffix(" (résumé)")


def _folder_of(source_file: str) -> str:
    found = split_source_file(source_file)
    return found[1] if found else ""


def _summaries(conn: psycopg.Connection, files: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The chunks of these summaries, each with what its anchors cite (rag.cites), by file."""
    rows = _rows(
        conn,
        "SELECT g.*, rag.cites(g.source_file, g.chunk_index) AS cites FROM unnest(%s::text[]) f(file) "
        "CROSS JOIN LATERAL rag.get_node(f.file) g",
        (files,),
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["source_file"], []).append(r)
    return out


def _sentences(conn: psycopg.Connection, files: list[str]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The anchored sentences of these summaries (chapter summaries written by the team or an
    LLM have them; extractive ones and part or book summaries do not), by (file, chunk)."""
    rows = _rows(
        conn,
        "SELECT source_file, chunk_index, sentence_index, content, cited_source_file, cited_paragraphs "
        "FROM rag.sentences WHERE source_file = ANY(%s::text[]) "
        "ORDER BY source_file, chunk_index, sentence_index",
        (files,),
    )
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["source_file"], r["chunk_index"]), []).append(r)
    return out


def _anchors(cites: list[dict[str, Any]], titles: dict[str, str]) -> list[Anchor]:
    """Links for what a chunk's anchors cite: paragraphs of a source.md, or child summaries, named
    by their label ('Chapitre VII', not its title too) in the book's order (`titles` is in it)."""
    position = {f: i for i, f in enumerate(titles)}
    out = []
    for c in sorted(cites, key=lambda c: position.get(c["source_file"], len(position))):
        url = citation_url("", c["source_file"], c["paragraphs"])
        if url is None:
            continue
        label = (
            section_label(c["paragraphs"])
            if c["paragraphs"]
            else titles.get(c["source_file"], c["source_file"]).split(" (", 1)[0]
        )
        out.append(Anchor(label, url))
    return out


def _extractive(chunks: list[dict[str, Any]]) -> bool:
    """The summary's chunks are the extractive provider's: the author's sentences chosen by a program."""
    return any(c.get("kind") == EXTRACTIVE_KIND for c in chunks)


def _summary(
    chunks: list[dict[str, Any]],
    sentences: dict[tuple[str, int], list[dict[str, Any]]],
    titles: dict[str, str],
    prefix: str,
) -> list[SummaryParagraph]:
    """A summary's paragraphs: its sentences, each with its anchor links, or, for a chunk without
    sentence rows, the chunk's text followed by what it cites."""
    paragraphs: dict[int, SummaryParagraph] = {}
    for chunk in chunks:
        number = chunk["paragraph"] or chunk["chunk_index"] + 1
        para = paragraphs.setdefault(number, SummaryParagraph(number, []))
        rows = sentences.get((chunk["source_file"], chunk["chunk_index"]))
        if rows:
            for s in rows:
                para.sentences.append(
                    Sentence(
                        f"{prefix}s-{chunk['chunk_index']}-{s['sentence_index']}",
                        room_text.render(s["content"]),
                        [
                            Anchor(
                                section_label(s["cited_paragraphs"]),
                                citation_url("", s["cited_source_file"], s["cited_paragraphs"]) or "",
                            )
                        ],
                    )
                )
        else:
            para.sentences.append(
                Sentence(
                    f"{prefix}s-{chunk['chunk_index']}",
                    room_text.render(chunk["content"]),
                    _anchors(chunk["cites"] or [], titles),
                )
            )
    return list(paragraphs.values())


class Catalogue:
    """rag.list_books and each book's rag.outline, kept between requests and read again when a
    load has changed the book: every load stamps rag.books.loaded_at in its own transaction, and
    that primary-key lookup costs a fraction of rag.outline's pass over the book's rows."""

    def __init__(self) -> None:
        self._stamps: dict[str, Any] | None = None
        self._books: list[dict[str, Any]] = []
        self._outlines: dict[str, tuple[Any, list[dict[str, Any]]]] = {}

    def books(self, conn: psycopg.Connection) -> list[dict[str, Any]]:
        stamps = {r["book"]: r["loaded_at"] for r in _rows(conn, "SELECT book, loaded_at FROM rag.books", ())}
        if stamps != self._stamps:
            self._books, self._stamps = list_books(conn), stamps
        return self._books

    def outline(self, conn: psycopg.Connection, book: str) -> list[dict[str, Any]]:
        """rag.outline's rows; an unknown book is a 404."""
        stamp = _rows(conn, "SELECT loaded_at FROM rag.books WHERE book = %s", (book,))
        if not stamp:
            raise PageError(404, f"no book {book!r} in the library; see the list of books at /")
        cached = self._outlines.get(book)
        if cached is not None and cached[0] == stamp[0]["loaded_at"]:
            return cached[1]
        rows = _rows(conn, "SELECT * FROM rag.outline(%s)", (book,))
        self._outlines[book] = (stamp[0]["loaded_at"], rows)
        return rows


def node_page(
    conn: psycopg.Connection, catalogue: Catalogue, book: str, folder: str, highlight: list[int]
) -> ChapterPage | TreePage:
    """The page of a folder: a section's (chapter or front matter) or a book's or part's tree."""
    rows = catalogue.outline(conn, book)
    page: ChapterPage | TreePage | None = (
        chapter_page(conn, rows, book, folder, highlight) if folder else None
    )
    page = page or tree_page(conn, rows, book, folder)
    if page is None:
        raise PageError(
            404,
            f"no chapter or part {folder!r} in {_book_title(rows, book)}; its table of contents is "
            f"at {page_path(book)}",
        )
    return page


def tree_page(
    conn: psycopg.Connection, rows: list[dict[str, Any]], book: str, folder: str
) -> TreePage | None:
    """The tree below a book or part folder, each node with its summary; None when the folder is
    not a book's or a part's (a chapter has its own page)."""
    base = f"corpus/{book}/" + (f"{folder}/" if folder else "")
    files = {r["source_file"] for r in rows}
    if base + "summary.md" not in files or base + "source.md" in files:
        return None
    sections = {_folder_of(r["source_file"]) for r in rows if r["node_type"] == "source"}
    summaries = [r for r in rows if r["node_type"] == "summary" and r["source_file"].startswith(base)]
    titles = {r["source_file"]: _title(r["heading_path"], r["source_file"]) for r in rows}
    names = [r["source_file"] for r in summaries]
    chunks, sentences = _summaries(conn, names), _sentences(conn, names)
    entries: dict[str, Entry] = {}
    for r in summaries:  # document order: a parent comes before its children
        f = _folder_of(r["source_file"])
        entry = Entry(f, titles[r["source_file"]], r["level"], page_path(book, f), f in sections)
        entry.summary = _summary(
            chunks.get(r["source_file"], []), sentences, titles, "" if f == folder else f"{f}/"
        )
        entry.extractive = _extractive(chunks.get(r["source_file"], []))
        entries[r["source_file"]] = entry
        parent = entries.get(r["parent_source_file"] or "")
        if parent is not None and f != folder:
            parent.children.append(entry)
    root = entries[base + "summary.md"]
    book_title = _book_title(rows, book)
    trail = [Link(book_title, page_path(book))] if folder else []
    return TreePage(book, book_title, root, trail)


def _book_title(rows: list[dict[str, Any]], book: str) -> str:
    return next(
        (
            (r["heading_path"] or "").split(" > ", 1)[0].removesuffix(" (résumé)")
            for r in rows
            if r["heading_path"]
        ),
        book,
    )


def chapter_page(
    conn: psycopg.Connection, rows: list[dict[str, Any]], book: str, folder: str, highlight: list[int]
) -> ChapterPage | None:
    """A section's page, or None when the folder has no text (source.md) of its own."""
    source, summary = f"corpus/{book}/{folder}/source.md", f"corpus/{book}/{folder}/summary.md"
    sections = [r for r in rows if r["node_type"] == "source"]
    at = next((i for i, r in enumerate(sections) if r["source_file"] == source), None)
    if at is None:
        return None
    titles = {r["source_file"]: _title(r["heading_path"], r["source_file"]) for r in rows}
    text = _rows(conn, "SELECT * FROM rag.get_node(%s) ORDER BY chunk_index", (source,))
    merged: dict[int, list[str]] = {}
    for r in text:  # a long paragraph is several chunks: one § again
        merged.setdefault(r["paragraph"] or r["chunk_index"] + 1, []).append(r["content"])
    authors = {r["paragraph"] for r in text if r["kind"] == "author_summary"}
    wanted = set(highlight)
    missing = sorted(wanted - merged.keys())
    title = titles.get(summary) or _title(sections[at]["heading_path"], source)
    if missing:
        raise PageError(
            404,
            f"{title} has paragraphs §1–{max(merged, default=0)}; "
            f"{section_label(missing)} {'is' if len(missing) == 1 else 'are'} not among them",
        )
    chunks = _summaries(conn, [summary]).get(summary, []) if summary in titles else []
    sentences = _sentences(conn, [summary]) if chunks else {}
    summary_paragraphs = _summary(chunks, sentences, titles, "")
    cited_by: dict[int, list[str]] = {}
    for (_, chunk_index), rows_ in sentences.items():
        for s in rows_:
            if s["cited_source_file"] == source:
                for p in s["cited_paragraphs"]:
                    cited_by.setdefault(p, []).append(f"s-{chunk_index}-{s['sentence_index']}")
    texts = {n: " ".join(parts) for n, parts in merged.items()}
    notes, seen = room_text.Notes.of(list(texts.values())), set[str]()
    paragraphs = [
        Paragraph(
            n,
            room_text.render(t, notes, seen),
            room_text.note_label(t) is not None,
            n in wanted,
            cited_by.get(n, []),
            n in authors,
        )
        for n, t in sorted(texts.items())
    ]
    book_title = _book_title(rows, book)
    trail = [Link(book_title, page_path(book))]
    parent = next((r["parent_source_file"] for r in rows if r["source_file"] == summary), None) or ""
    if _folder_of(parent):  # a part (the book's own summary is the first link already)
        trail.append(Link(titles.get(parent, _folder_of(parent)), page_path(book, _folder_of(parent))))

    def link(i: int) -> Link | None:
        if not 0 <= i < len(sections):
            return None
        f = _folder_of(sections[i]["source_file"])
        return Link(
            titles.get(f"corpus/{book}/{f}/summary.md") or _title(sections[i]["heading_path"], f),
            page_path(book, f),
        )

    return ChapterPage(
        book,
        book_title,
        title,
        (text[0]["heading_path"] if text else "") or title,
        source,
        summary_paragraphs,
        paragraphs,
        section_label(highlight) if highlight else "",
        trail,
        link(at - 1),
        link(at + 1),
        _extractive(chunks),
    )


@dataclass
class SearchHit:
    rank: int
    heading_path: str
    citation: str
    url: str
    chapter: Link | None
    branches: list[str]
    excerpt: Markup
    author: bool = False  # the author's own summary of the section (kind author_summary)
    scholarly: Markup = Markup("")  # the citation a scholar writes (bookrag.cite), the hit's lead
    editor_note: bool = False  # a footnote the text marks as the editor's (rag.paragraphs' kind)
    extractive: bool = False  # the author's sentences chosen by a program (kind extractive_summary)


_TITLE = re.compile(r"\*([^*]+)\*")


def scholarly_markup(citation: str) -> Markup:
    """A scholarly citation (bookrag.cite) as HTML: its *title* in <cite>, the rest escaped."""
    return Markup(_TITLE.sub(r"<cite>\1</cite>", str(Markup.escape(citation))))


def search_hits(rows: list[dict[str, Any]]) -> list[SearchHit]:
    """rag.search's rows (with bookrag.cite.add_citations' `citation` and marks) as the search page
    lists them: scholarly citation, link into the text, the file and § as a detail, chapter, the
    rank each branch gave."""
    out = []
    for r in rows:
        branches = []
        if r.get("bm25_rank") is not None:
            branches.append(f"BM25 #{r['bm25_rank']}")
        if r.get("vector_rank") is not None:
            branches.append(f"vector #{r['vector_rank']}")
        if r.get("sentence_rank") is not None:
            branches.append(f"summary sentence #{r['sentence_rank']}")
        if r.get("section_score") is not None:
            branches.append(f"chapter {r['section_score']:.2f}")
        if r.get("found_by"):
            branches.append(
                "found by "
                + ", ".join(
                    f"{'the question' if i == 0 else f'wording {i}'} #{rank}"
                    for i, rank in zip(r["found_by"], r["phrasing_ranks"])
                )
            )
        found = split_source_file(r["source_file"])
        chapter = None
        if found and found[1]:
            chapter = Link(_title(r["heading_path"], found[1]), page_path(found[0], found[1]))
        where = f"§{r['paragraph']}" if r.get("paragraph") else f"chunk {r['chunk_index']}"
        if r.get("paragraph") and (r.get("parts") or 1) > 1:
            where += f" ({r['part']}/{r['parts']})"
        excerpt = r["content"] if len(r["content"]) <= 700 else r["content"][:699] + "…"
        out.append(
            SearchHit(
                r["rank"],
                r["heading_path"] or "",
                f"{r['source_file']} {where}",
                citation_url("", r["source_file"], r.get("paragraph")) or "",
                chapter,
                branches,
                room_text.render(excerpt),
                r.get("kind") == "author_summary",
                scholarly_markup(r.get("citation") or ""),
                r.get("kind") == "editor_note",
                r.get("kind") == EXTRACTIVE_KIND,
            )
        )
    return out
