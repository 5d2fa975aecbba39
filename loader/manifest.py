"""Book manifests (corpus/<book>/book.toml) and the summary tree they define.

The manifest is the single description of a book's structure: where its raw text comes from,
where each part and section starts, slugs, titles, theme for the summary prompts and the
embedding policy. `book_tree` turns it into the list of corpus nodes (files) with their
parent, level, heading path and document order; prepare, summarize, check and load all use it.
Format: docs/manifests.md.
"""

from __future__ import annotations

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
    kind: str = "chapter"  # chapter | introduction | conclusion | front-matter
    heading_blocks: int | None = None

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

    @property
    def folder(self) -> str:
        return self.source_file.rsplit("/", 1)[0]


def _section(raw: dict, where: str) -> Section:
    try:
        return Section(
            slug=raw["slug"], title=raw["title"], label=raw.get("label", raw["title"]),
            start=raw.get("start"), end=raw.get("end"), file=raw.get("file"),
            kind=raw.get("kind", "chapter"), heading_blocks=raw.get("heading_blocks"),
        )
    except KeyError as exc:
        raise BookragError(f"{where}: section lacks {exc.args[0]!r}") from exc


def load_book(path: Path) -> Book:
    """Parse corpus/<book>/book.toml; errors name the file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BookragError(f"{path}: no such manifest") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BookragError(f"{path}: invalid TOML: {exc}") from exc
    return parse_book(data, path)


def parse_book(data: dict, path: Path) -> Book:
    """The Book a parsed manifest describes; `path` is where it lives (errors name it)."""
    try:
        b, src = data["book"], data.get("source", {})
        policy = data.get("embedding", {}).get("policy", "all")
        if policy not in POLICIES:
            raise BookragError(f"{path}: embedding.policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        if b["slug"] != path.parent.name:
            raise BookragError(f"{path}: book.slug {b['slug']!r} differs from its folder {path.parent.name!r}")
        parts = tuple(
            Part(slug=p["slug"], title=p["title"], subtitle=p.get("subtitle"), file=p.get("file"),
                 start=p.get("start"), end=p.get("end"),
                 sections=tuple(_section(s, f"{path}: part {p['slug']}") for s in p.get("sections", [])))
            for p in data.get("parts", [])
        )
        return Book(
            slug=b["slug"], title=b["title"], author=b.get("author", ""), year=b.get("year"),
            language=b.get("language", "fr"), source_kind=src.get("kind", "none"),
            source_folder=src.get("folder"), encoding=src.get("encoding", "utf-8"),
            files=tuple(RawFile(f["name"], f.get("sha256", ""), f.get("url")) for f in src.get("files", [])),
            heading_blocks=data.get("structure", {}).get("heading_blocks", 1),
            theme=Theme(**{k: v for k, v in data.get("theme", {}).items() if k in Theme.__dataclass_fields__}),
            policy=policy,
            front_matter=tuple(_section(s, f"{path}: front_matter") for s in data.get("front_matter", [])),
            parts=parts, path=path, extra={k: v for k, v in src.items() if k not in ("files",)},
        )
    except KeyError as exc:
        raise BookragError(f"{path}: missing field {exc.args[0]!r}") from exc


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
    section (summary, source), then each part (summary, then its sections' summary, source)."""
    base = f"corpus/{book.slug}"
    root = f"{base}/summary.md"
    nodes = [Node(root, None, 3, "summary", f"{book.title} (résumé)", book.title, 0)]

    def add_section(folder: str, parent: str, path_prefix: str, part: Part | None, s: Section) -> None:
        heading = f"{path_prefix} > {s.heading}"
        summary = f"{folder}/{s.slug}/summary.md"
        nodes.append(Node(summary, parent, 1, "summary", f"{heading} (résumé)", s.title, len(nodes), part, s))
        nodes.append(Node(f"{folder}/{s.slug}/source.md", summary, 0, "source", heading, s.title, len(nodes), part, s))

    for s in book.front_matter:
        add_section(base, root, book.title, None, s)
    for p in book.parts:
        summary = f"{base}/{p.slug}/summary.md"
        nodes.append(Node(summary, root, 2, "summary", f"{book.title} > {p.title} (résumé)", p.title, len(nodes), p))
        for s in p.sections:
            add_section(f"{base}/{p.slug}", summary, f"{book.title} > {p.title}", p, s)
    return nodes


def embed_flag(book: Book, node: Node) -> bool:
    """The frontmatter embed flag the book's policy gives a node."""
    if book.policy == "none":
        return False
    if book.policy == "summaries-only":
        return node.node_type == "summary"
    return True
