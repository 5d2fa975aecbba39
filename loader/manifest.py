"""Book manifests (corpus/<book>/book.toml) and the summary tree they define.

The manifest is the single description of a book's structure: where its raw text comes from,
where each part and section starts, slugs, titles, theme for the summary prompts and the
embedding policy. `book_tree` turns it into the list of corpus nodes (files) with their
parent, level, heading path and document order; prepare, summarize, check and load all use it.
Format: docs/manifests.md.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bookrag.errors import BookragError

POLICIES = ("all", "summaries-only", "none")


@dataclass(frozen=True)
class RawFile:
    name: str
    sha256: str
    url: str | None = None


@dataclass(frozen=True)
class Section:
    slug: str
    title: str
    label: str
    start: str | None = None
    end: str | None = None
    file: str | None = None
    kind: str = "chapter"  # chapter | introduction | conclusion | front-matter | section | note
    heading_blocks: int | None = None
    sections: tuple[Section, ...] = ()  # sub-sections: a node has paragraphs or sub-sections, never both
    line: int = 0  # the line of its [[…sections]] / [[front_matter]] table in book.toml (0: unknown)

    @property
    def heading(self) -> str:
        """'Chapitre VII (Pétition …)', or just the label when title and label agree."""
        return self.label if self.title == self.label else f"{self.label} ({self.title})"


@dataclass(frozen=True)
class Part:
    slug: str
    title: str
    sections: tuple[Section, ...]
    subtitle: str | None = None
    file: str | None = None
    start: str | None = None
    end: str | None = None


@dataclass(frozen=True)
class Theme:
    field: str = ""
    period: str = ""
    genre: str = ""
    angle: str = ""


@dataclass(frozen=True)
class Book:
    slug: str
    title: str
    author: str
    year: int | None
    language: str
    source_kind: str
    source_folder: str | None
    encoding: str
    files: tuple[RawFile, ...]
    heading_blocks: int
    theme: Theme
    policy: str
    front_matter: tuple[Section, ...]
    parts: tuple[Part, ...]
    path: Path
    extra: dict = field(default_factory=dict)
    volume: str | None = None  # which volume of the work this book is, as citations name it (e.g. "II")


@dataclass(frozen=True)
class Node:
    """One corpus file of the summary tree."""

    source_file: str  # repo-relative path, e.g. corpus/<book>/<part>/<section>/source.md
    parent_source_file: str | None
    level: int
    node_type: str  # source | summary
    heading_path: str
    title: str
    order: int  # preorder position in the book
    part: Part | None = None
    section: Section | None = None
    depth: int = 0  # structural depth: 0 the book, 1 a part or front matter, 2 a part's chapter, …

    @property
    def folder(self) -> str:
        return self.source_file.rsplit("/", 1)[0]


HEADER_RE = re.compile(r"^\s*\[\[\s*([\w.]+)\s*\]\]")


def table_lines(text: str) -> dict[str, list[int]]:
    """Line numbers (from 1) of each array-of-tables header, by key, in file order: the k-th
    `[[parts.sections]]` is the k-th section of depth 1 under the parts in preorder."""
    out: dict[str, list[int]] = {}
    for k, line in enumerate(text.splitlines(), start=1):
        if m := HEADER_RE.match(line):
            out.setdefault(m.group(1), []).append(k)
    return out


def check_nesting(text: str, path: Path) -> None:
    """A `[[….sections]]` table must follow a table of the level just above it (its parent):
    `[[parts.sections.sections]]` right after `[[parts]]` skips a level."""
    chain: list[str] = []
    for k, line in enumerate(text.splitlines(), start=1):
        m = HEADER_RE.match(line)
        if not m:
            continue
        key = m.group(1)
        parent = key.rsplit(".", 1)[0] if "." in key else ""
        if key.endswith(".sections") and parent not in chain:
            raise BookragError(
                f"{path}:{k}: [[{key}]] has no [[{parent}]] above it: the nesting skips a level"
            )
        chain = chain[: chain.index(parent) + 1] + [key] if parent in chain else [key]


def _section(raw: dict, where: str, key: str, lines: dict[str, list[int]], seen: dict[str, int]) -> Section:
    n = seen.get(key, 0)
    seen[key] = n + 1
    at = lines.get(key, [])
    line = at[n] if n < len(at) else 0
    here = f"{where}:{line}" if line else where
    subs = raw.get("sections", [])
    if not isinstance(subs, list):
        raise BookragError(f"{here}: its sub-sections skip a level (write [[{key}.sections]] under it)")
    try:
        return Section(
            slug=raw["slug"],
            title=raw["title"],
            label=raw.get("label", raw["title"]),
            start=raw.get("start"),
            end=raw.get("end"),
            file=raw.get("file"),
            kind=raw.get("kind", "chapter"),
            heading_blocks=raw.get("heading_blocks"),
            sections=tuple(_section(s, where, f"{key}.sections", lines, seen) for s in subs),
            line=line,
        )
    except KeyError as exc:
        raise BookragError(f"{here}: section lacks {exc.args[0]!r}") from exc


def load_book(path: Path) -> Book:
    """Parse corpus/<book>/book.toml; errors name the file."""
    try:
        text = path.read_text(encoding="utf-8")
        check_nesting(text, path)  # before TOML's own complaint, which a skipped level may also raise
        data = tomllib.loads(text)
    except FileNotFoundError as exc:
        raise BookragError(f"{path}: no such manifest") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BookragError(f"{path}: invalid TOML: {exc}") from exc
    return parse_book(data, path, text)


def parse_book(data: dict, path: Path, text: str = "") -> Book:
    """The Book a parsed manifest describes; `path` is where it lives, `text` its TOML (errors
    name the file, and the line when the text is given)."""
    check_nesting(text, path)
    lines, seen = table_lines(text), dict[str, int]()
    try:
        b, src = data["book"], data.get("source", {})
        policy = data.get("embedding", {}).get("policy", "all")
        if policy not in POLICIES:
            raise BookragError(
                f"{path}: embedding.policy must be one of {', '.join(POLICIES)}, got {policy!r}"
            )
        volume = b.get("volume")
        if volume is not None and (not isinstance(volume, str) or not volume.strip()):
            raise BookragError(f'{path}: book.volume must be a non-empty string such as "II", got {volume!r}')
        volume = volume.strip() if volume is not None else None
        if b["slug"] != path.parent.name:
            raise BookragError(
                f"{path}: book.slug {b['slug']!r} differs from its folder {path.parent.name!r}"
            )
        parts = tuple(
            Part(
                slug=p["slug"],
                title=p["title"],
                subtitle=p.get("subtitle"),
                file=p.get("file"),
                start=p.get("start"),
                end=p.get("end"),
                sections=_sections(p.get("sections", []), str(path), "parts.sections", lines, seen),
            )
            for p in data.get("parts", [])
        )
        return Book(
            slug=b["slug"],
            title=b["title"],
            author=b.get("author", ""),
            year=b.get("year"),
            language=b.get("language", "fr"),
            source_kind=src.get("kind", "none"),
            source_folder=src.get("folder"),
            encoding=src.get("encoding", "utf-8"),
            files=tuple(RawFile(f["name"], f.get("sha256", ""), f.get("url")) for f in src.get("files", [])),
            heading_blocks=data.get("structure", {}).get("heading_blocks", 1),
            theme=Theme(
                **{k: v for k, v in data.get("theme", {}).items() if k in Theme.__dataclass_fields__}
            ),
            policy=policy,
            front_matter=_sections(data.get("front_matter", []), str(path), "front_matter", lines, seen),
            parts=parts,
            path=path,
            extra={k: v for k, v in src.items() if k not in ("files",)},
            volume=volume,
        )
    except KeyError as exc:
        raise BookragError(f"{path}: missing field {exc.args[0]!r}") from exc


def _sections(
    raw: object, where: str, key: str, lines: dict[str, list[int]], seen: dict[str, int]
) -> tuple[Section, ...]:
    if not isinstance(raw, list):
        first = min((x for k, v in lines.items() if k.startswith(key) for x in v), default=0)
        raise BookragError(
            f"{where}:{first}: [[{key}]] is missing above this table: the nesting skips a level"
        )
    return tuple(_section(s, where, key, lines, seen) for s in raw)


def find_book(corpus: Path, slug: str) -> Book:
    path = corpus / slug / "book.toml"
    if not path.exists():
        known = ", ".join(sorted(p.parent.name for p in corpus.glob("*/book.toml"))) or "(none)"
        raise BookragError(f"unknown book {slug!r}: no {path}; books with a manifest: {known}")
    return load_book(path)


def all_books(corpus: Path) -> list[Book]:
    return [load_book(p) for p in sorted(corpus.glob("*/book.toml"))]


def book_tree(book: Book) -> list[Node]:
    """Every node of the book in document (pre)order: root summary, then each front-matter
    section, then each part (summary, then its sections). A leaf section (paragraphs) is a
    level-1 summary and its level-0 source.md; a section with sub-sections is a level-2 summary
    followed by its sub-sections, to any depth (docs/decisions/0034-trees-of-any-depth.md)."""
    base = f"corpus/{book.slug}"
    root = f"{base}/summary.md"
    nodes = [Node(root, None, 3, "summary", f"{book.title} (résumé)", book.title, 0)]

    def add_section(
        folder: str, parent: str, path_prefix: str, part: Part | None, s: Section, depth: int
    ) -> None:
        heading = f"{path_prefix} > {s.heading}"
        summary = f"{folder}/{s.slug}/summary.md"
        level = 2 if s.sections else 1
        nodes.append(
            Node(
                summary, parent, level, "summary", f"{heading} (résumé)", s.title, len(nodes), part, s, depth
            )
        )
        if not s.sections:
            nodes.append(
                Node(
                    f"{folder}/{s.slug}/source.md",
                    summary,
                    0,
                    "source",
                    heading,
                    s.title,
                    len(nodes),
                    part,
                    s,
                    depth,
                )
            )
        for c in s.sections:
            add_section(f"{folder}/{s.slug}", summary, heading, part, c, depth + 1)

    for s in book.front_matter:
        add_section(base, root, book.title, None, s, 1)
    for p in book.parts:
        summary = f"{base}/{p.slug}/summary.md"
        nodes.append(
            Node(
                summary,
                root,
                2,
                "summary",
                f"{book.title} > {p.title} (résumé)",
                p.title,
                len(nodes),
                p,
                None,
                1,
            )
        )
        for s in p.sections:
            add_section(f"{base}/{p.slug}", summary, f"{book.title} > {p.title}", p, s, 2)
    return nodes


def embed_flag(book: Book, node: Node) -> bool:
    """The frontmatter embed flag the book's policy gives a node."""
    if book.policy == "none":
        return False
    if book.policy == "summaries-only":
        return node.node_type == "summary"
    return True
