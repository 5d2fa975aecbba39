"""The interface every importer implements, and what importers share.

An importer turns a book's raw text into the corpus tree's source.md files (PIAF's also writes
the summaries, the manifest and an evalset). Each module of loader/importers exposes
`prepare(settings, book, *, download, source) -> PreparedBook`; loader.importers.registry
maps a manifest's `source.kind` to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bookrag.config import Settings
from loader import frontmatter
from loader.manifest import Book, Node, embed_flag


@dataclass(frozen=True)
class PreparedBook:
    root: Path  # corpus/<slug> in the checkout
    files: list[Path]  # the source.md files, written or already up to date
    evalset: Path | None = None  # an evalset generated with the corpus (PIAF)

    def line(self) -> str:
        """What `bookrag prepare` prints for the book."""
        if self.evalset is not None:
            return f"wrote {self.root} and {self.evalset}"
        return f"{self.root.name}: {len(self.files)} source files"


class Prepare(Protocol):
    def __call__(
        self, settings: Settings, book: Book, *, download: bool = False, source: Path | None = None
    ) -> PreparedBook:
        """Write the book's corpus files from its raw text: from BOOKRAG_SOURCES, from `source`
        (a local export, `--from`) or, with `download`, from the manifest's URL."""
        ...


def section_key(node: Node) -> str:
    """A section node's key, its folder under the book: 'slug' for front matter, 'part/slug' for a
    section of a part, 'part/chapter/slug' for a sub-section, and so on."""
    assert node.section is not None
    return node.folder.split("/", 2)[2]


def source_meta(book: Book, node: Node) -> dict[str, Any]:
    """The frontmatter of a source.md, the same for every importer."""
    return {
        "book": book.slug,
        "title": node.title,
        "heading_path": node.heading_path,
        "level": node.level,
        "node_type": node.node_type,
        "parent_source_file": node.parent_source_file,
        "embed": embed_flag(book, node),
    }


def write_sources(
    settings: Settings,
    book: Book,
    bodies: list[tuple[Node, str]],
    extra: dict[str, dict[str, Any]] | None = None,
) -> PreparedBook:
    """Write each node's source.md (frontmatter and body), leaving files already up to date
    untouched; called once every section is converted, so a bad section writes nothing.
    `extra`: more frontmatter fields by source_file (e.g. loader.author_summary.FIELD)."""
    files = []
    for node, body in bodies:
        path = settings.home / node.source_file
        text = frontmatter.render(
            {**source_meta(book, node), **(extra or {}).get(node.source_file, {})}, body
        )
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            frontmatter.write_atomic(path, text)
        files.append(path)
    return PreparedBook(settings.corpus / book.slug, files)
