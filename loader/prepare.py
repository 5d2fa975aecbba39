"""`bookrag prepare`: dispatch on the manifest's source kind."""

from __future__ import annotations

from pathlib import Path

from bookrag.config import Settings
from bookrag.errors import BookragError
from loader.manifest import Book


def prepare(settings: Settings, book: Book, download: bool = False, source: Path | None = None) -> list[Path]:
    if book.source_kind in ("gutenberg", "text"):
        from loader.gutenberg import prepare_book

        return prepare_book(settings, book, download)
    if book.source_kind == "wikisource":
        from loader.wikisource import prepare_book as prepare_wikisource

        return prepare_wikisource(settings, book, download=download, export=source)
    raise BookragError(f"{book.path}: source.kind {book.source_kind!r} has no importer (gutenberg, text, wikisource)")
