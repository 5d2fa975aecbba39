"""Importers: a book's raw text to its corpus files, one module per source kind, chosen by the
manifest's `source.kind` (registry.IMPORTERS)."""

from loader.importers.base import Prepare, PreparedBook
from loader.importers.registry import IMPORTERS, Importer, book_to_prepare, importer_for, prepared_by_default

__all__ = [
    "IMPORTERS",
    "Importer",
    "Prepare",
    "PreparedBook",
    "book_to_prepare",
    "importer_for",
    "prepared_by_default",
]
