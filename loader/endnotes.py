"""End notes (issue 36): the notes a Gutenberg book gathers after its last chapter under a
`NOTES.` heading, each headed `(_A_) PAGE 25.` and called from the text as `puissances(_A_).`
(Tocqueville's *Démocratie*, 1835; footnotes inside chapters are loader.importers.gutenberg's).

`bookrag add` makes each note a section of a "Notes" part (a node of the tree, prepared,
summarised, embedded and searched like a chapter), titled by the places that call it
(loader.propose). A call whose note is missing, a note no text calls and a label given twice are
errors that name the file and line: `raw_problems` on the raw file (`add` writes nothing then),
`corpus_problems` on the prepared corpus (`bookrag check`). The paragraph that calls a note cites
it: `note_files` and `called_labels` give its sidecar chunk's `cites` (loader.sidecars), loaded
into rag.citations like a summary's anchors (decision 0036).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from loader import frontmatter
from loader.detect import TOC_RE
from loader.manifest import Book, Node, book_tree

#: The heading of the notes: NOTES. / NOTE. / NOTES DE L'AUTEUR. on a line of its own.
NOTES_RE = re.compile(r"^NOTES?(?:\s+DE\s+L'AUTEUR)?\s*\.?$")
#: One note's heading: (_A_) PAGE 25.  (the page of the first edition that calls it; optional).
NOTE_RE = re.compile(r"^\(_(?P<label>[A-Z]{1,2}|\d{1,3})_\)(?:\s*(?:PAGE|P\.)\s*(?P<page>\d+))?\s*\.?$")
#: A call in the text: puissances(_A_).
CALL_RE = re.compile(r"\(_(?P<label>[A-Z]{1,2}|\d{1,3})_\)")


@dataclass(frozen=True)
class Note:
    label: str  # "A"
    page: int | None  # the page its heading names
    line: int  # 0-based line of its heading
    start: str  # that line, stripped (the manifest's `start`)


@dataclass(frozen=True)
class Call:
    label: str
    line: int  # 0-based line of the call


@dataclass
class EndNotes:
    file: str
    heading_line: int  # 0-based line of NOTES.
    heading: str
    end: int  # first line after the notes: a table of contents, or the end of the text
    notes: list[Note] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)  # in the text before the notes, in order


def _next_text(lines: list[str], i: int) -> int | None:
    for j in range(i + 1, len(lines)):
        if lines[j].strip():
            return j
    return None


def find(file: str, lines: list[str]) -> EndNotes | None:
    """The end notes of one raw file (its decoded text lines): the first `NOTES.` heading whose
    next line of text is a note heading, every note heading up to a table of contents (or the
    end), and every call in the text before the heading. None when the file has no such notes."""
    for i, line in enumerate(lines):
        if not NOTES_RE.match(line.strip()):
            continue
        j = _next_text(lines, i)
        if j is None or not NOTE_RE.match(lines[j].strip()):
            continue
        end = next((k for k in range(j, len(lines)) if TOC_RE.match(lines[k].strip())), len(lines))
        en = EndNotes(file, i, line.strip(), end)
        for k in range(j, end):
            m = NOTE_RE.match(lines[k].strip())
            if m and (k == 0 or not lines[k - 1].strip()):
                en.notes.append(
                    Note(
                        m.group("label"),
                        int(m.group("page")) if m.group("page") else None,
                        k,
                        lines[k].strip(),
                    )
                )
        en.calls = [Call(m.group("label"), k) for k in range(i) for m in CALL_RE.finditer(lines[k])]
        return en
    return None


def pair_problems(notes: list[tuple[str, str]], calls: list[tuple[str, str]]) -> list[str]:
    """Problems of (label, where) notes against (label, where) calls, `where` being "file:line":
    a label given to two notes, a call without its note, a note nobody calls; in text order."""
    out: list[str] = []
    first: dict[str, str] = {}
    for label, where in notes:
        if label in first:
            out.append(f"{where}: note (_{label}_) is given twice (first at {first[label]})")
        else:
            first[label] = where
    called = {label for label, _ in calls}
    for label, where in calls:
        if label not in first:
            out.append(f"{where}: calls note (_{label}_), which the notes do not hold")
    for label, where in notes:
        if label not in called and first.get(label) == where:
            out.append(f"{where}: note (_{label}_) is never called in the text")
    return out


def raw_problems(en: EndNotes, path: str, offset: int = 0) -> list[str]:
    """pair_problems of a raw file, lines as the raw file numbers them (`offset`: where the
    decoded text starts in it, loader.propose.RawBook.offset)."""
    at = lambda line: f"{path}:{offset + line + 1}"  # noqa: E731
    return pair_problems([(n.label, at(n.line)) for n in en.notes], [(c.label, at(c.line)) for c in en.calls])


def note_label(section_start: str | None) -> str | None:
    """The label of a manifest section that is an end note (its start is a note heading)."""
    m = NOTE_RE.match((section_start or "").strip())
    return m.group("label") if m else None


def note_files(book: Book, tree: list[Node] | None = None) -> dict[str, str]:
    """label -> the source.md of that end note, for a manifest with note sections ({} without)."""
    out: dict[str, str] = {}
    for n in tree or book_tree(book):
        if n.node_type == "source" and n.section is not None and n.section.kind == "note":
            label = note_label(n.section.start)
            if label is not None:
                out.setdefault(label, n.source_file)
    return out


def book_notes(home: Path, slug: str) -> dict[str, str]:
    """note_files of the book `slug` under home/corpus ({} without a manifest), read once per
    manifest text: sidecars and load ask for every source.md of the book."""
    toml = home / "corpus" / slug / "book.toml"
    return _notes_of_manifest(toml, toml.read_bytes()) if toml.exists() else {}


@lru_cache(maxsize=16)
def _notes_of_manifest(toml: Path, _text: bytes) -> dict[str, str]:
    from loader.manifest import load_book

    return note_files(load_book(toml))


def called_labels(text: str) -> list[str]:
    """The labels a text calls, in order, each once: "(_B_) … (_C_)" -> ["B", "C"]."""
    return list(dict.fromkeys(m.group("label") for m in CALL_RE.finditer(text)))


def _body_lines(path: Path) -> tuple[list[str], int]:
    """A prepared .md's body lines and the file line the body starts on (1-based)."""
    text = path.read_text(encoding="utf-8")
    body = frontmatter.split(text, path)[1]
    return body.split("\n"), text[: len(text) - len(body)].count("\n") + 1


def corpus_problems(home: Path, book: Book, tree: list[Node] | None = None) -> list[str]:
    """pair_problems on a prepared book whose manifest has note sections (kind "note"): the
    calls in every other source.md against the notes; [] for a book without end notes, or
    whose sources are not prepared."""
    tree = tree or book_tree(book)
    sources = [n for n in tree if n.node_type == "source"]
    note_nodes = [
        (n, label)
        for n in sources
        if n.section is not None and n.section.kind == "note"
        for label in [note_label(n.section.start)]
        if label
    ]
    if not note_nodes:
        return []
    notes = []
    for n, label in note_nodes:  # located at the first line of the note's text
        path = home / n.source_file
        notes.append((label, f"{n.source_file}:{_body_lines(path)[1] if path.exists() else 1}"))
    calls = []
    for n in sources:
        path = home / n.source_file
        if (n.section is not None and n.section.kind == "note") or not path.exists():
            continue
        lines, first = _body_lines(path)
        calls += [
            (m.group("label"), f"{n.source_file}:{first + k}")
            for k, line in enumerate(lines)
            for m in CALL_RE.finditer(line)
        ]
    return pair_problems(notes, calls)
