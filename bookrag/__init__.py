"""bookrag: retrieval-augmented generation over whole books, inside PostgreSQL."""

from bookrag.config import Settings, load_settings
from bookrag.errors import BookragError

__all__ = ["BookragError", "Settings", "load_settings"]
