"""`bookrag add`: read a raw book, find its structure (loader/detect.py), show the tree and
write the proposed corpus/<slug>/book.toml (format: docs/manifests.md).

The manifest is checked before it is written: the start and end lines it names, searched the
way `bookrag prepare` searches them, must cut the text exactly where the detection did.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from bookrag.errors import BookragError
from loader import endnotes
from loader.detect import Part as DetectedPart
from loader.detect import (
    Problem,
    Section,
    Structure,
    apply_toc_titles,
    chapter_subentries,
    check_structure,
    count_words,
    detect,
    find_appended,
    find_subsections,
    leaf_sections,
    match_toc,
    normalize,
    skip_blocks,
    split_long_sections,
    text_blocks,
    toc_ranges,
)

START_RE = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT\s+GUTENBERG EBOOK.*$", re.M)
END_RE = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT\s+GUTENBERG EBOOK.*$", re.M)
GUTENBERG_NAME_RE = re.compile(r"Project\s+Gutenberg")
HEADER_RE = {
    key: re.compile(rf"^{label}:\s*(.+)$", re.M)
    for key, label in (
        ("title", "Title"),
        ("author", "Author"),
        ("language", "Language"),
        ("encoding", "Character set encoding"),
    )
}
EBOOK_RE = re.compile(r"\[E(?:Book|text) #(\d+)\]", re.I)
LANGUAGES = {"french": "fr", "english": "en", "german": "de", "italian": "it", "spanish": "es", "latin": "la"}


@dataclass(frozen=True)
class RawBook:
    """One raw file, decoded, with what its Gutenberg header says."""

    path: Path
    encoding: str  # utf-8 | iso-8859-1
    sha256: str
    size: int
    gutenberg: bool
    offset: int  # raw line number (0-based) of the first text line
    lines: list[str]
    header: dict[str, str]
    ebook: int | None


@dataclass(frozen=True)
class Proposal:
    slug: str
    title: str
    author: str
    year: int | None
    language: str
    books: list[RawBook]
    structure: Structure
    warnings: list[str]
    manifest: str  # the book.toml text


def read_raw(path: Path, gutenberg: bool | None = None) -> RawBook:
    """Decode a raw book; keep the text between Gutenberg's markers when it is a Gutenberg file.
    Refuses empty, binary and undecodable files, and Gutenberg files without their markers."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BookragError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BookragError(f"{path} is a folder: give the book's text file") from None
    if not data.strip():
        raise BookragError(f"{path} is empty: there is no text to find a structure in")
    if b"\x00" in data[:65536]:
        raise BookragError(
            f"{path} is a binary file, not plain text: give the book as a .txt file (UTF-8 or ISO-8859-1)"
        )
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        bad = next((i for i, b in enumerate(data) if 0x80 <= b <= 0x9F), None)
        if bad is not None:
            raise BookragError(
                f"{path} has bytes that are neither UTF-8 nor ISO-8859-1 text (byte 0x{data[bad]:02x} at offset {bad}; "
                f"UTF-8 fails at offset {exc.start}): convert the file to UTF-8"
            ) from None
        text, encoding = data.decode("iso-8859-1"), "iso-8859-1"
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    head = text[:5000]
    start, end = START_RE.search(text), END_RE.search(text)
    is_gutenberg = bool(start or end or GUTENBERG_NAME_RE.search(head)) if gutenberg is None else gutenberg
    if is_gutenberg and (start is None or end is None):
        which = "START" if start is None else "END"
        raise BookragError(
            f"{path} looks like a Gutenberg file but its {which} marker line "
            f"('*** {which} OF THE … GUTENBERG EBOOK …') is missing: use the complete file as downloaded"
        )
    header = {k: r.search(text[: start.start()] if start else head) for k, r in HEADER_RE.items()}
    ebook = EBOOK_RE.search(text[: start.start()] if start else head)
    if is_gutenberg:
        assert start is not None and end is not None
        offset = text[: start.start()].count("\n")  # line 0 is the rest of the marker line, as in prepare
        lines = text[start.end() : end.start()].split("\n")
    else:
        offset, lines = 0, text.split("\n")
    return RawBook(
        path,
        encoding,
        hashlib.sha256(data).hexdigest(),
        len(data),
        is_gutenberg,
        offset,
        lines,
        {k: m.group(1).strip() for k, m in header.items() if m},
        int(ebook.group(1)) if ebook else None,
    )


def slugify(text: str, words: int = 8) -> str:
    text = unicodedata.normalize("NFKD", text.replace("œ", "oe").replace("Œ", "OE").replace("æ", "ae"))
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return "-".join(re.findall(r"[a-z0-9]+", text)[:words])


def _title(structure: Structure, raw: RawBook) -> str:
    header = raw.header.get("title", "")
    if structure.title:  # the header's spelling when it says the same ("Amérique", not "amérique")
        prefix = " ".join(header.split()[: len(structure.title.split())]).rstrip(",;:. ")
        return prefix if normalize(prefix) == normalize(structure.title) else structure.title
    return header or raw.path.stem


def _year(raw: RawBook) -> int | None:
    for line in raw.lines[:300]:
        if re.fullmatch(r"1[5-9]\d\d|20\d\d", line.strip()):
            return int(line.strip())
    return None


def no_headings_error(books: list[RawBook]) -> BookragError:
    """Name the most frequent heading-like line shapes, to help writing the manifest by hand."""
    shapes: dict[str, list[str]] = {}
    for raw in books:
        for a, b in text_blocks(raw.lines, 0):
            line = raw.lines[a].strip()
            if b - a == 1 and 1 <= len(line.split()) <= 8 and len(line) <= 60:
                shape = re.sub(r"\b(?:[IVXLC]+|\d+)\b", "#", line)
                shapes.setdefault(shape, []).append(line)
    common = sorted(((len(v), k) for k, v in shapes.items() if len(v) >= 2), reverse=True)[:3]
    seen = "; ".join(f"{k!r} ({n}×)" for n, k in common) or "none"
    names = ", ".join(str(r.path) for r in books)
    return BookragError(
        f"no chapter or part headings found in {names} (most frequent heading-like lines: {seen}); "
        f"write corpus/<slug>/book.toml by hand, see docs/manifests.md"
    )


def group_books(files: list[Path]) -> list[list[Path]]:
    """The books `bookrag add FILE…` is given: the files of one folder are one book (its volumes,
    in the order given), one book per folder, folders in the order they first appear."""
    books: dict[Path, list[Path]] = {}
    for f in files:
        books.setdefault(f.resolve().parent, []).append(f)
    return list(books.values())


def propose(
    files: list[Path],
    *,
    slug: str | None = None,
    title: str | None = None,
    author: str | None = None,
    year: int | None = None,
    gutenberg: int | None = None,
    sources: Path | None = None,
) -> Proposal:
    books = [read_raw(f, True if gutenberg else None) for f in files]
    first = books[0]
    language = LANGUAGES.get(first.header.get("language", "").lower(), "fr")
    names = [b.path.name for b in books]
    if len(set(names)) != len(names):
        raise BookragError(f"two files share the name {names[0]!r}: give each raw file once")
    structure = detect({b.path.name: b.lines for b in books}, language)
    if not structure.parts and not any(s.kind == "chapter" for s in structure.front_matter):
        raise no_headings_error(books)
    apply_toc_titles(structure)
    texts = {b.path.name: b.lines for b in books}
    structure.offsets = {b.path.name: b.offset for b in books}
    listed = {id(e) for _sec, entries in chapter_subentries(structure) for e in entries}
    disagreements = find_subsections(structure, texts, structure.offsets)
    structure.toc = [
        e for e in structure.toc if id(e) not in listed
    ]  # each has its own warning when not found
    appended, disagreements = appended_documents(structure, books, disagreements, language)
    empty_sections(structure, books)
    book_title = title or _title(structure, first)
    book_author = author or first.header.get("author", "")
    book_year = year or _year(first)
    book_slug = slug or slugify(
        " ".join([book_author.split()[-1] if book_author else "", book_title]).strip()
    )
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", book_slug):
        raise BookragError(f"slug {book_slug!r} must be lower-case letters, digits and dashes")
    caps = {q.file: q.line for q in reversed(appended)}  # the notes end where the first document starts
    notes = end_notes(structure, books, caps)
    structure.parts += appended
    disagreements += split_long_sections(structure, texts)
    warnings = check_structure(structure)  # the notes are short by nature: no size warnings for them
    offsets = structure.offsets
    warnings += [f"{d.file} line {offsets[d.file] + d.line + 1}: {d.message}" for d in disagreements]
    structure.parts[len(structure.parts) - len(appended) : len(structure.parts) - len(appended)] = notes
    structure.left_out = outside(structure.left_out, appended, texts)
    for f, a, _b, words in structure.left_out:
        if words >= 100:
            raw = next(b for b in books if b.path.name == f)
            warnings.append(
                f"{words:,} words after line {raw.offset + a + 1} of {f} are left out "
                f"({_first_text(raw.lines, a)!r} …): end matter, or another work in the same file"
            )
    ebook = gutenberg or first.ebook
    manifest = render_manifest(
        structure,
        books,
        slug=book_slug,
        title=book_title,
        author=book_author,
        year=book_year,
        language=language,
        ebook=ebook,
        sources=sources,
    )
    warnings += verify(manifest, book_slug, structure, books)
    return Proposal(
        book_slug, book_title, book_author, book_year, language, books, structure, warnings, manifest
    )


def empty_sections(structure: Structure, books: list[RawBook]) -> None:
    """A sub-section whose heading the next one follows with no text between them holds no
    paragraph: BookragError naming each, with its line (nothing is written)."""
    offsets = {b.path.name: (b.path, b.offset) for b in books}
    tops = structure.front_matter + [x for p in structure.parts for x in p.sections]
    empty = [leaf for top in tops if top.sections for leaf in leaf_sections(top) if not leaf.words]
    if empty:
        raise BookragError(
            "sections without paragraphs (a heading followed by the next heading): "
            + "; ".join(
                f"{offsets[x.file][0]} line {offsets[x.file][1] + x.line + 1} {x.title!r}" for x in empty
            )
            + "; fix the file or write the manifest by hand (docs/manifests.md)"
        )


def appended_documents(
    structure: Structure, books: list[RawBook], disagreements: list[Problem], language: str
) -> tuple[list[DetectedPart], list[Problem]]:
    """The parts of documents appended to the volume (loader.detect.find_appended), from the
    contents entries the tree does not hold: those missing from it, and those listed under a
    chapter that holds no heading for them (their "no heading inside" warning is dropped once
    placed). A file's end notes (loader.endnotes) are not a document. Returns the parts (not yet
    in the structure) and the disagreements left."""
    texts = {b.path.name: b.lines for b in books}
    notes: dict[str, int] = {}
    heading: dict[str, str] = {}
    for raw in books:
        found = endnotes.find(raw.path.name, raw.lines)
        if found is not None:
            notes[raw.path.name], heading[raw.path.name] = found.heading_line, normalize(found.heading)
    missing = [
        e for e in match_toc(structure)[1] if e.kind != "part" and heading.get(e.file) != normalize(e.title)
    ]
    unplaced = sorted(
        missing + [d.entry for d in disagreements if d.entry is not None], key=lambda e: (e.file, e.line)
    )
    parts, problems, placed = find_appended(structure, texts, unplaced, language, notes)
    done = {id(e) for e in placed}
    return parts, [d for d in disagreements if d.entry is None or id(d.entry) not in done] + problems


def outside(
    left_out: list[tuple[str, int, int, int]], parts: list[DetectedPart], texts: dict[str, list[str]]
) -> list[tuple[str, int, int, int]]:
    """The text left out once the appended documents' parts are taken out of it (tables of
    contents not counted)."""
    out = []
    for f, a, b, _words in left_out:
        pieces = [(a, b)]
        for p in parts:
            if p.file == f:
                pieces = [
                    x
                    for lo, hi in pieces
                    for x in ((lo, min(hi, p.line)), (max(lo, p.end), hi))
                    if x[0] < x[1]
                ]
        tocs = toc_ranges(texts[f])
        for lo, hi in pieces:
            words = count_words(
                [x for i, x in enumerate(texts[f][lo:hi], lo) if not any(t <= i < u for t, u in tocs)]
            )
            if words:
                out.append((f, lo, hi, words))
    return out


def end_notes(
    structure: Structure, books: list[RawBook], caps: dict[str, int] | None = None
) -> list[DetectedPart]:
    """A book's end notes (loader.endnotes) as a last part to add, "Notes", with one section per
    note, titled by the sections and paragraphs that call it (the paragraph as `bookrag prepare`
    numbers it); they no longer count as text left out, nor as a contents entry missing from the
    tree. A call without its note, a note no text calls, a label given twice: BookragError naming
    each file and line (nothing is written)."""
    from loader.importers.gutenberg import to_paragraphs

    out: list[DetectedPart] = []
    for raw in books:
        f, lines = raw.path.name, raw.lines
        tops = [(p, sec) for p in [None] for sec in structure.front_matter] + [
            (p, sec) for p in structure.parts for sec in p.sections
        ]
        tree = [(p, leaf) for p, sec in tops for leaf in leaf_sections(sec)]
        chapter = {id(leaf): sec for _p, sec in tops for leaf in leaf_sections(sec)}
        found = endnotes.find(f, lines)
        if found is None or found.heading_line < max(
            (sec.end for _p, sec in tree if sec.file == f), default=0
        ):
            continue  # no end notes, or the heading lies inside a section of the tree
        cap = (caps or {}).get(f)
        if cap is not None and found.heading_line < cap < found.end:  # a document appended after the notes
            found.end = cap
            found.notes = [n for n in found.notes if n.line < cap]
        problems = endnotes.raw_problems(found, str(raw.path), raw.offset)
        if problems:
            raise BookragError(
                f"{raw.path}: its end notes and their calls disagree ({len(problems)} "
                f"problem{'s' if len(problems) > 1 else ''}); fix the file or its manifest by hand:\n"
                + "\n".join(problems)
            )
        places: dict[str, list[str]] = {}
        paragraphs: dict[int, list[str]] = {}
        for call in found.calls:
            where = next(
                ((p, sec) for p, sec in tree if sec.file == f and sec.line <= call.line < sec.end), None
            )
            if where is None:
                continue  # a call in text the tree leaves out
            p, sec = where
            if id(sec) not in paragraphs:
                paragraphs[id(sec)] = to_paragraphs(lines[sec.body : sec.end])
            numbers = [
                k for k, para in enumerate(paragraphs[id(sec)], start=1) if f"(_{call.label}_)" in para
            ]
            top = chapter[id(sec)]
            place = ", ".join(
                x
                for x in [
                    p.title if p else "",
                    top.label,
                    sec.title if sec is not top else "",
                    f"§ {numbers[0]}" if numbers else "",
                ]
                if x
            )
            if place not in places.setdefault(call.label, []):
                places[call.label].append(place)
        notes = []
        for k, note in enumerate(found.notes):
            end = found.notes[k + 1].line if k + 1 < len(found.notes) else found.end
            body = skip_blocks(lines, note.line, 1)
            label = f"Note {note.label}"
            title = "; ".join(places.get(note.label, [])) or (f"page {note.page}" if note.page else label)
            notes.append(
                Section(
                    "note",
                    label,
                    title,
                    None,
                    f,
                    note.line,
                    body,
                    end,
                    note.start,
                    1,
                    count_words(lines[body:end]),
                )
            )
        out.append(
            DetectedPart(
                "Notes", "Notes", None, None, f, found.heading_line, found.end, found.heading, 1, notes
            )
        )
        structure.toc = [
            e for e in structure.toc if e.kind == "part" or normalize(e.title) != normalize(found.heading)
        ]
        kept = []  # the notes are no longer left out; text before them still is
        for lf, a, b, words in structure.left_out:
            if lf == f and a <= found.heading_line < b:
                a, b, words = a, found.heading_line, count_words(lines[a : found.heading_line])
            if words:
                kept.append((lf, a, b, words))
        structure.left_out = kept
    return out


def _first_text(lines: list[str], a: int) -> str:
    return next((x.strip() for x in lines[a:] if x.strip()), "")[:50]


# --- the manifest -------------------------------------------------------------------------


def _q(text: str) -> str:
    """A TOML basic string."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    out = "".join(c if c >= " " or c == "\t" else f"\\u{ord(c):04x}" for c in out)
    return f'"{out}"'


def _section_slug(sec: Section, taken: set[str]) -> str:
    if sec.kind == "chapter" and sec.number is not None:
        base = f"chapitre-{sec.number:02d}-{slugify(sec.title, 6)}".rstrip("-")
    elif sec.kind == "note":
        base = slugify(sec.label)
    else:
        base = slugify(sec.title, 6) or sec.kind
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _common(values: list[int]) -> int:
    return max(set(values), key=lambda v: (values.count(v), -v)) if values else 1


def _folder(raw: RawBook, sources: Path | None) -> str:
    if sources is not None:
        try:
            rel = raw.path.resolve().parent.relative_to(sources.resolve())
            return rel.as_posix() if str(rel) != "." else "."
        except ValueError:
            pass
    return raw.path.resolve().parent.name


def _url(raw: RawBook, ebook: int | None) -> str | None:
    n = raw.ebook or ebook
    if n is None:
        return None
    return f"https://www.gutenberg.org/files/{n}/{n}-{'8' if raw.encoding == 'iso-8859-1' else '0'}.txt"


def render_manifest(
    s: Structure,
    books: list[RawBook],
    *,
    slug: str,
    title: str,
    author: str,
    year: int | None,
    language: str,
    ebook: int | None,
    sources: Path | None,
) -> str:
    first = books[0]
    sections = [x for x in s.front_matter] + [x for p in s.parts for x in p.sections]
    default_blocks = _common([x.heading_blocks for x in sections])
    kind = "gutenberg" if first.gutenberg else "text"
    out = [
        "# Book manifest proposed by `bookrag add` from the book's own headings: check the tree, fill [theme].",
        "# Format: docs/manifests.md.",
        "",
        "[book]",
        f"slug = {_q(slug)}",
        f"title = {_q(title)}",
        f"author = {_q(author)}",
    ]
    out += [f"year = {year}"] if year else ["# year = 0   # not found in the text: the year of publication"]
    out += [f"language = {_q(language)}", "", "[source]", f"kind = {_q(kind)}"]
    if kind == "gutenberg" and ebook:
        out.append(f"ebook = {ebook}")
    out += [
        f"folder = {_q(_folder(first, sources))}   # under $BOOKRAG_SOURCES",
        f"encoding = {_q(first.encoding)}",
        "",
    ]
    for raw in books:
        out += [
            "[[source.files]]",
            f"name = {_q(raw.path.name)}",
            f"sha256 = {_q(raw.sha256)}",
            f"size = {raw.size}",
        ]
        url = _url(raw, ebook) if kind == "gutenberg" else None
        out += [f"url = {_q(url)}"] if url else []
        out.append("")
    out += [
        "[structure]",
        f"heading_blocks = {default_blocks}",
        "",
        "[theme]   # fed to the summary prompts (loader/prompts/*.j2): fill it before `bookrag summarize` with an LLM",
        'field = ""    # the discipline, e.g. "économie politique"',
        'period = ""   # where and when, e.g. "France, Second Empire (1850-1860)"',
        'genre = ""    # e.g. "traité", "pamphlets", "essai"',
        'angle = ""    # what the reader studies in each chapter (the analytical angle)',
        "",
        "[embedding]",
        'policy = "all"',
        "",
    ]
    taken: set[str] = set()
    for sec in s.front_matter:
        out += ["[[front_matter]]"] + _section_lines(sec, taken, default_blocks, file=True)
        lines = next(b.lines for b in books if b.path.name == sec.file)
        out += [f"end = {_q(lines[sec.end].strip())}"] if sec.end < len(lines) else []
        out += [f"# {sec.words:,} words", ""] + _subsection_tables(sec, "front_matter", default_blocks)
    part_slugs: set[str] = set()
    for p in s.parts:
        lines = next(b.lines for b in books if b.path.name == p.file)
        base, n = slugify(p.title, 6), 2
        pslug = base
        while pslug in part_slugs:
            pslug, n = f"{base}-{n}", n + 1
        part_slugs.add(pslug)
        out += ["[[parts]]", f"slug = {_q(pslug)}", f"title = {_q(p.title)}"]
        out += [f"subtitle = {_q(p.subtitle)}"] if p.subtitle else []
        out += [f"file = {_q(p.file)}", f"start = {_q(p.start)}"]
        out += [f"end = {_q(lines[p.end].strip())}"] if p.end < len(lines) else []
        out.append("")
        taken = set()
        for sec in p.sections:
            out += ["[[parts.sections]]"] + _section_lines(sec, taken, default_blocks, file=False)
            out += [f"# {sec.words:,} words", ""] + _subsection_tables(sec, "parts.sections", default_blocks)
    return "\n".join(out)


def _subsection_tables(sec: Section, key: str, default_blocks: int) -> list[str]:
    """The [[<key>.sections]] tables of sec's sub-sections, then theirs, in reading order. Slugs
    are numbered in order ("01-du-vote-universel"); a leading sub-section is "00-debut"."""
    out: list[str] = []
    for k, sub in enumerate(
        sec.sections, start=0 if sec.sections and sec.sections[0].start == sec.start else 1
    ):
        slug = "00-debut" if k == 0 else f"{k:02d}-{slugify(sub.title, 6)}".rstrip("-")
        out += [
            f"[[{key}.sections]]",
            f"slug = {_q(slug)}",
            f"title = {_q(sub.title)}",
            f"label = {_q(sub.label)}",
            f"kind = {_q(sub.kind)}",
            f"start = {_q(sub.start)}",
        ]
        out += [f"heading_blocks = {sub.heading_blocks}"] if sub.heading_blocks != default_blocks else []
        out += [f"# {sub.words:,} words", ""] + _subsection_tables(sub, f"{key}.sections", default_blocks)
    return out


def _section_lines(sec: Section, taken: set[str], default_blocks: int, file: bool) -> list[str]:
    out = [f"slug = {_q(_section_slug(sec, taken))}", f"title = {_q(sec.title)}", f"label = {_q(sec.label)}"]
    out += [f"kind = {_q(sec.kind)}"] if sec.kind != "chapter" else []
    out += [f"file = {_q(sec.file)}"] if file else []
    out.append(f"start = {_q(sec.start)}")
    out += [f"heading_blocks = {sec.heading_blocks}"] if sec.heading_blocks != default_blocks else []
    return out


def verify(manifest: str, slug: str, s: Structure, books: list[RawBook]) -> list[str]:
    """Cut the text with the manifest the way `bookrag prepare` does; any section whose lines
    differ from the detection's is named (a start line that also occurs earlier, for instance)."""
    from loader.importers.gutenberg import section_ranges
    from loader.manifest import load_book

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / slug / "book.toml"
        path.parent.mkdir()
        path.write_text(manifest, encoding="utf-8")
        book = load_book(path)
    try:
        ranges = section_ranges(book, {b.path.name: b.lines for b in books})
    except BookragError as exc:
        return [f"the proposed manifest does not cut the text as shown: {str(exc).split(': ', 1)[-1]}"]
    leaves = [(leaf, top.label) for top in s.front_matter for leaf in leaf_sections(top)]
    leaves += [
        (leaf, f"{top.label} of {p.title}")
        for p in s.parts
        for top in p.sections
        for leaf in leaf_sections(top)
    ]
    expected = [(leaf.file, leaf.line, leaf.body, leaf.end) for leaf, _label in leaves]
    got = list(ranges.values())
    out = []
    for (e, g), label in zip(
        zip(expected, got),
        [
            label if leaf.label == top else f"{leaf.label!r} in {top}"
            for (leaf, top), label in zip(leaves, [x[1] for x in leaves])
        ],
    ):
        if e != g:
            out.append(
                f"{label}: `bookrag prepare` would cut lines {g[1] + 1}-{g[3]} instead of {e[1] + 1}-{e[3]}; "
                f"edit its start/end in the manifest"
            )
    return out


# --- printing -----------------------------------------------------------------------------


def render_tree(p: Proposal) -> list[str]:
    offsets = {b.path.name: b.offset for b in p.books}
    total = sum(x.words for x in p.structure.front_matter) + sum(
        x.words for q in p.structure.parts for x in q.sections
    )
    files = ", ".join(b.path.name for b in p.books)
    out = [
        f"{p.title} — {p.author or 'unknown author'}{f', {p.year}' if p.year else ''}  ({files}, {total:,} words)",
        "  level 2: parts, chapters with sections; level 1: sections with text; line: where the heading is in the raw file",
    ]

    def rows(indent: str, sec: Section) -> list[str]:
        head = sec.label if sec.title == sec.label else f"{sec.label} — {sec.title}"
        line = f"{indent}{2 if sec.sections else 1}  {head}"
        if len(line) > 72:
            line = line[:71] + "…"
        return [f"{line:<73} line {offsets[sec.file] + sec.line + 1:>6}  {sec.words:>7,} words"] + [
            r for sub in sec.sections for r in rows(indent + "  ", sub)
        ]

    for sec in p.structure.front_matter:
        out += rows("  ", sec)
    for q in p.structure.parts:
        words = sum(x.words for x in q.sections)
        head = q.title + (f" — {q.subtitle}" if q.subtitle else "")
        head = head if len(head) <= 68 else head[:67] + "…"
        out.append(f"  2  {head:<68} line {offsets[q.file] + q.line + 1:>6}  {words:>7,} words")
        for sec in q.sections:
            out += rows("    ", sec)
    return out + author_summary_lines(p)


def author_summary_lines(p: Proposal) -> list[str]:
    """What `add` says of the author's own summaries it recognised (loader.author_summary)."""
    from loader.importers.gutenberg import author_summaries

    lines = {b.path.name: b.lines for b in p.books}
    sections = [
        *p.structure.front_matter,
        *(x for q in p.structure.parts for x in q.sections if x.kind != "note"),
    ]
    found = [author_summaries(lines[sec.file][sec.body : sec.end]) for sec in sections]
    total, heads = sum(len(a) for a in found), sum(1 for a in found if a and a[0] == 1)
    if not total:
        return []
    return [
        f"  the author's own summaries: {total} in {sum(1 for a in found if a)} sections ({heads} opening a section, "
        f"{total - heads} after a heading inside one); each stays a paragraph of its own, marked author_summary"
    ]


def check_free(corpus: Path, slug: str, force: bool = False) -> None:
    """An existing manifest is never overwritten without --force."""
    if (corpus / slug / "book.toml").exists() and not force:
        raise BookragError(
            f"corpus/{slug}/book.toml already exists: choose another --slug, or pass --force to overwrite it"
        )


def write_manifest(corpus: Path, p: Proposal, force: bool = False) -> Path:
    check_free(corpus, p.slug, force)
    path = corpus / p.slug / "book.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(p.manifest, encoding="utf-8")
    tmp.replace(path)
    return path


def next_step(p: Proposal, sources: Path | None) -> str:
    """What to run after `add`: prepare, with BOOKRAG_SOURCES when the file is not under it."""
    raw = p.books[0].path.resolve()
    folder = _folder(p.books[0], sources)
    root = raw.parent if folder == "." else raw.parents[len(Path(folder).parts)]
    if sources is not None and sources.resolve() == root:
        return f"bookrag prepare {p.slug}"
    return f"BOOKRAG_SOURCES={root} bookrag prepare {p.slug}"
