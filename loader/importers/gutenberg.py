"""Prepare a Gutenberg plain-text book into the corpus tree (source.md files).

Steps: find the raw file (BOOKRAG_SOURCES/<folder>/<name>; without that folder, the copy
downloaded from the manifest's URL into .bookrag/downloads/), refuse it if its sha256 differs, decode (ISO-8859-1 here) and normalise CRLF, keep only
the text between Gutenberg's START and END lines, cut it into the manifest's parts and
sections by their exact start lines, and turn each section's body into paragraphs.

Paragraphs: blank lines separate paragraphs; hard-wrapped lines are joined with one space;
Gutenberg's `--` becomes an em dash. Footnotes stay where Gutenberg puts them, right after
the paragraph they annotate, as Markdown footnote definitions (`[^12]: …`, one paragraph even
when the note has several), and their markers become `[^12]`; transcriber markers pointing
to end notes we skip (`[TN-A]`) are removed. The section's heading block(s) are not part of
the body: the title lives in the frontmatter and the heading path. The author's own summaries
(an indented run of phrases separated by `--` after a heading: loader.author_summary) stay
paragraphs of their own, listed in the frontmatter's `author_summaries`.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bookrag.config import Settings
from bookrag.errors import BookragError
from loader import author_summary
from loader.detect import skip_blocks
from loader.importers.base import PreparedBook, section_key, write_sources
from loader.manifest import Book, Node, RawFile, Section, book_tree

START_RE = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT\s+GUTENBERG EBOOK.*$", re.M)
END_RE = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT\s+GUTENBERG EBOOK.*$", re.M)
NOTE_START_RE = re.compile(r"^\[Note (\w+): ?")
MARKER_RE = re.compile(r"\[(\d+)\]")
TN_MARKER_RE = re.compile(r"\[TN-[A-Z]+\]")


@dataclass(frozen=True)
class PreparedSection:
    node: Node  # the source.md node
    raw_lines: list[str]  # the section's body lines in the raw file (after the heading)
    paragraphs: list[str]
    author_summaries: list[int]  # the paragraphs that are the author's own summaries (1-based)


def raw_path(settings: Settings, book: Book, raw: RawFile, download: bool = False) -> Path:
    """The raw file on disk, checked against the manifest's sha256: BOOKRAG_SOURCES/<folder>/<name>
    when that folder is set, else the copy fetched from the manifest's URL into the state
    directory (.bookrag/downloads/<book>/), downloaded the first time it is needed."""
    if settings.sources is not None:
        path = settings.require_sources() / (book.source_folder or book.slug) / raw.name
        if download and not path.exists():
            path = download_path(settings, book, raw)
    else:
        path = download_path(settings, book, raw)
    if not path.exists() and (download or settings.sources is None):
        _download(raw, path, book)
    if not path.exists():
        hint = f" (or run with --download to fetch {raw.url})" if raw.url else ""
        raise BookragError(f"raw book file missing: {path}{hint}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if raw.sha256 and digest != raw.sha256:
        raise BookragError(
            f"{path} has sha256 {digest}, but {book.path.relative_to(settings.home) if book.path.is_relative_to(settings.home) else book.path} "
            f"expects {raw.sha256}: a different edition or a damaged file; fetch the file the manifest names"
        )
    return path


def download_path(settings: Settings, book: Book, raw: RawFile) -> Path:
    return settings.state_dir / "downloads" / book.slug / raw.name


def _download(raw: RawFile, path: Path, book: Book) -> None:
    """Fetch raw.url into path: streamed into path.part, its sha256 checked, then renamed. A
    refused connection, a dropped one (fewer bytes than announced) or a wrong checksum leaves
    nothing behind, and says in one sentence what to fetch by hand and where to put it."""
    by_hand = (
        f"download {raw.url or raw.name} and put it at {path}, or set BOOKRAG_SOURCES to a folder holding "
        f"{book.source_folder or book.slug}/{raw.name}"
    )
    if not raw.url:
        raise BookragError(
            f"{book.slug}: the manifest gives no URL for {raw.name}; put the file at {path}, or set "
            f"BOOKRAG_SOURCES to a folder holding {book.source_folder or book.slug}/{raw.name}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    digest = hashlib.sha256()
    print(f"downloading {raw.url} into {path.parent}/", file=sys.stderr)
    try:
        try:
            with urllib.request.urlopen(raw.url, timeout=60) as resp, part.open("wb") as out:
                announced = resp.headers.get("Content-Length")
                size = 0
                while chunk := resp.read(1 << 16):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                if announced is not None and size != int(announced):
                    raise http.client.IncompleteRead(b"", int(announced) - size)
        except http.client.IncompleteRead as exc:
            raise BookragError(
                f"cannot download {raw.url} (the connection dropped before the end of the file): {by_hand}"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise BookragError(f"cannot download {raw.url} ({reason}): {by_hand}") from exc
        if raw.sha256 and digest.hexdigest() != raw.sha256:
            raise BookragError(
                f"{raw.url} sent a file whose sha256 is {digest.hexdigest()}, not the manifest's "
                f"{raw.sha256}, so it was not kept: {by_hand}"
            )
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(path)


def read_text(path: Path, encoding: str, markers: bool = True) -> list[str]:
    """Decoded lines between Gutenberg's START and END markers (boilerplate removed); the whole
    file when `markers` is false (source.kind "text": a plain-text book from anywhere)."""
    text = path.read_bytes().decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
    if not markers:
        return text.split("\n")
    start, end = START_RE.search(text), END_RE.search(text)
    if start is None or end is None:
        raise BookragError(f"{path}: no Gutenberg START/END lines; is this a Gutenberg text file?")
    return text[start.end() : end.start()].split("\n")


def _find(lines: list[str], wanted: str, frm: int, where: str, file: str, stop: int | None = None) -> int:
    for i in range(frm, len(lines) if stop is None else stop):
        if lines[i].strip() == wanted:
            return i
    within = f" before line {stop + 1} (the end of the section holding it)" if stop is not None else ""
    raise BookragError(f"{where}: start line {wanted!r} not found in {file} after line {frm + 1}{within}")


Range = tuple[str, int, int, int]  # (file, heading line, body start, end)


def section_ranges(book: Book, texts: dict[str, list[str]]) -> dict[str, Range]:
    """Section key (its folder under the book, as base.section_key) -> (file, heading line, body
    start, end) for every leaf section, by the manifest's start lines searched in order (a cursor
    per file, so a table of contents never matches). A section with sub-sections spans them: they
    are searched inside it, and text between its heading and its first sub-section is refused (a
    leading sub-section whose start is the section's own takes it)."""
    where = str(book.path)
    cursor: dict[str, int] = {}
    out: dict[str, Range] = {}

    def here(s: Section) -> str:
        return f"{where}:{s.line}" if s.line else where

    def nest(s: Section, key: str, f: str, lines: list[str], head: int, end: int) -> None:
        """Place s (heading at `head`, up to `end`) and, recursively, its sub-sections."""
        body = skip_blocks(lines, head, book.heading_blocks if s.heading_blocks is None else s.heading_blocks)
        if not s.sections:
            out[key] = (f, head, body, end)
            return
        heads, c = [], head
        for sub in s.sections:
            c = (
                head
                if sub.start == s.start
                else _find(lines, sub.start or "", c + 1, f"{here(sub)}: section {key}/{sub.slug}", f, end)
            )
            heads.append(c)
        if heads[0] != head and to_paragraphs(lines[body : heads[0]]):
            raise BookragError(
                f"{here(s)}: section {key} has text between its heading ({f} line {head + 1}) and its first "
                f"sub-section (line {heads[0] + 1}) that belongs to no sub-section: add a leading "
                f"sub-section whose start is {s.start!r}"
            )
        for i, sub in enumerate(s.sections):
            nest(sub, f"{key}/{sub.slug}", f, lines, heads[i], heads[i + 1] if i + 1 < len(heads) else end)

    def default_file(s: Section | None) -> str:
        if s is not None and s.file:
            return s.file
        return book.files[0].name

    for s in book.front_matter:
        f = default_file(s)
        lines = texts[f]
        h = _find(lines, s.start or "", cursor.get(f, 0), f"{here(s)}: front matter {s.slug}", f)
        e = _find(lines, s.end, h + 1, f"{here(s)}: front matter {s.slug} end", f) if s.end else len(lines)
        nest(s, s.slug, f, lines, h, e)
        cursor[f] = e
    for p in book.parts:
        f = p.file or book.files[0].name
        lines = texts[f]
        p0 = (
            _find(lines, p.start or "", cursor.get(f, 0), f"{where}: part {p.slug}", f)
            if p.start
            else cursor.get(f, 0)
        )
        c, heads = p0, list[int]()
        for s in p.sections:
            c = (
                p0
                if s.start == p.start
                else _find(
                    lines,
                    s.start or "",
                    c + (0 if c == p0 and not heads else 1),
                    f"{here(s)}: part {p.slug}, section {s.slug}",
                    f,
                )
            )
            heads.append(c)
        pe = _find(lines, p.end, heads[-1] + 1, f"{where}: part {p.slug} end", f) if p.end else len(lines)
        for i, s in enumerate(p.sections):
            nest(s, f"{p.slug}/{s.slug}", f, lines, heads[i], heads[i + 1] if i + 1 < len(heads) else pe)
        cursor[f] = pe
    return out


def to_paragraphs(lines: list[str]) -> list[str]:
    """Blank-line separated blocks, hard wraps joined; footnote blocks become `[^N]: …`."""
    return [p for p, _raw in _blocks(lines)]


def author_summaries(lines: list[str]) -> list[int]:
    """The 1-based numbers of the to_paragraphs paragraphs that are the author's own summaries
    (loader.author_summary): a summary-shaped block opening the section, or following a heading
    in capitals (footnotes between them skipped)."""
    out: list[int] = []
    previous: list[str] | None = None  # the raw lines of the last block that is not a footnote
    for number, (_text, raw) in enumerate(_blocks(lines), start=1):
        if raw is None:
            continue
        if author_summary.is_summary_block(raw) and (
            previous is None or author_summary.is_heading_block(previous)
        ):
            out.append(number)
        previous = raw
    return out


def _blocks(lines: list[str]) -> list[tuple[str, list[str] | None]]:
    """(paragraph, its raw lines) for each paragraph; a footnote's raw lines are None."""
    paras: list[tuple[str, list[str] | None]] = []
    block: list[str] = []
    raw: list[str] = []
    note: list[str] | None = None
    depth = 0

    def flush() -> None:
        if block:
            paras.append((_clean(" ".join(block)), list(raw)))
            block.clear()
            raw.clear()

    for line in lines:
        s = line.strip()
        if note is not None:
            if s:
                note.append(s)
            depth += s.count("[") - s.count("]")
            if depth <= 0:
                text = " ".join(note)
                m = NOTE_START_RE.match(text)
                assert m is not None
                body = text[m.end() :]
                body = body[:-1] if body.endswith("]") else body
                paras.append((f"[^{m.group(1)}]: {_clean(body)}", None))
                note = None
            continue
        if NOTE_START_RE.match(s):
            flush()
            note, depth = [s], s.count("[") - s.count("]")
            if depth <= 0:  # one-line note
                note, depth = None, 0
                m = NOTE_START_RE.match(s)
                assert m is not None
                body = s[m.end() :]
                paras.append((f"[^{m.group(1)}]: {_clean(body[:-1] if body.endswith(']') else body)}", None))
            continue
        if s:
            block.append(s)
            raw.append(line)
        else:
            flush()
    flush()
    if note is not None:
        raise BookragError(f"unterminated footnote starting {' '.join(note)[:60]!r}")
    return [(p, r) for p, r in paras if p]


def _clean(text: str) -> str:
    text = TN_MARKER_RE.sub("", text)
    text = MARKER_RE.sub(r"[^\1]", text)
    text = text.replace("--", "—")
    return re.sub(r"\s+", " ", text).strip()


def prepare_sections(settings: Settings, book: Book, download: bool = False) -> list[PreparedSection]:
    texts = {
        raw.name: read_text(
            raw_path(settings, book, raw, download), book.encoding, book.source_kind != "text"
        )
        for raw in book.files
    }
    ranges = section_ranges(book, texts)
    out = []
    for node in book_tree(book):
        if node.node_type != "source":
            continue
        key = section_key(node)
        f, _h, body, end = ranges[key]
        raw_lines = texts[f][body:end]
        paras = to_paragraphs(raw_lines)
        if not paras:
            at = f"{book.path}:{node.section.line}" if node.section and node.section.line else str(book.path)
            raise BookragError(
                f"{at}: section {key} has no paragraphs in {f} (lines {_h + 1}-{end}); check its start "
                f"and end lines"
            )
        out.append(PreparedSection(node, raw_lines, paras, author_summaries(raw_lines)))
    return out


def prepare(
    settings: Settings, book: Book, *, download: bool = False, source: Path | None = None
) -> PreparedBook:
    """Write every source.md of a Gutenberg (or plain-text) book; `source` is not used: the raw
    files are named by the manifest."""
    sections = prepare_sections(settings, book, download)
    return write_sources(
        settings,
        book,
        [(sec.node, "\n\n".join(sec.paragraphs)) for sec in sections],
        {
            sec.node.source_file: {author_summary.FIELD: sec.author_summaries}
            for sec in sections
            if sec.author_summaries
        },
    )
