"""Which importer prepares a book: the manifest's `source.kind`, looked up in IMPORTERS.

Adding an importer: a module in loader/importers with `prepare` (loader.importers.base), and
one line below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bookrag.errors import BookragError
from loader.importers import gutenberg, piaf, wikisource
from loader.importers.base import Prepare
from loader.manifest import Book, find_book


@dataclass(frozen=True)
class Importer:
    prepare: Prepare
    by_default: bool = (
        False  # a bare `bookrag prepare` and the demo prepare these books (raw files in BOOKRAG_SOURCES)
    )
    manifest_book: Callable[[Path], Book] | None = (
        None  # the importer writes the manifest: the book before it exists
    )


IMPORTERS: dict[str, Importer] = {
    "gutenberg": Importer(gutenberg.prepare, by_default=True),
    "text": Importer(gutenberg.prepare),  # a plain file read whole: no Gutenberg header and footer
    "wikisource": Importer(wikisource.prepare),
    "piaf": Importer(piaf.prepare, manifest_book=piaf.manifest_book),  # the corpus is named after its kind
}


def importer_for(book: Book) -> Importer:
    """The importer of the book's `source.kind`."""
    importer = IMPORTERS.get(book.source_kind)
    if importer is None:
        kinds = ", ".join(kind for kind, i in IMPORTERS.items() if i.manifest_book is None)
        raise BookragError(f"{book.path}: source.kind {book.source_kind!r} has no importer ({kinds})")
    return importer


def prepared_by_default(book: Book) -> bool:
    """Whether a bare `bookrag prepare` (and the demo) prepares the book, without --from or --download."""
    importer = IMPORTERS.get(book.source_kind)
    return importer is not None and importer.by_default


def book_to_prepare(corpus: Path, name: str) -> Book:
    """The book `bookrag prepare NAME` means: its manifest, or, for a corpus whose importer
    writes the manifest (PIAF), the book that importer starts from."""
    importer = IMPORTERS.get(name)
    if importer is not None and importer.manifest_book is not None:
        return importer.manifest_book(corpus)
    return find_book(corpus, name)
