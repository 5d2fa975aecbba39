"""Where a citation lives in the reading room (mcp_server/reading_room.py): the one place that
turns a node's source_file and paragraph numbers into a URL, for the CLI, the MCP tools and the
reading room's own pages.

    corpus/<book>/summary.md                        /books/<book>
    corpus/<book>/<part>/summary.md                 /books/<book>/<part>
    corpus/<book>/<part>/<chapter>/source.md §12    /books/<book>/<part>/<chapter>?hl=12#p12
    corpus/<book>/<part>/<chapter>/summary.md §2    /books/<book>/<part>/<chapter>#summary-2

`hl` lists the paragraphs to highlight (`4-7,9`: runs compressed); the fragment scrolls to the
first of them. node_of_url reads such a URL back into its source_file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import SplitResult, quote, unquote, urlsplit

#: Where `bookrag mcp --http` listens by default (BOOKRAG_READING_ROOM_URL overrides it).
DEFAULT_BASE = "http://127.0.0.1:8765"


def split_source_file(source_file: str) -> tuple[str, str, str] | None:
    """(book, folder below the book, file name) of `corpus/<book>/[<folder>/]<file>.md`, else None."""
    parts = source_file.split("/")
    if (
        len(parts) < 3
        or parts[0] != "corpus"
        or not parts[-1].endswith(".md")
        or any(p in ("", ".", "..") for p in parts)
    ):
        return None
    return parts[1], "/".join(parts[2:-1]), parts[-1]


def compress(paragraphs: Iterable[int]) -> str:
    """'4-7,9' for [4, 5, 6, 7, 9]: sorted, duplicates dropped, runs joined by a hyphen."""
    runs: list[list[int]] = []
    for p in sorted(set(paragraphs)):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def page_path(book: str, folder: str = "") -> str:
    """The reading room's page of a book (folder ''), a part or a chapter."""
    return quote(f"/books/{book}" + (f"/{folder}" if folder else ""))


def citation_url(base: str, source_file: str, paragraphs: int | Iterable[int] | None = None) -> str | None:
    """The URL of a citation in the reading room at `base` ('' for a path on the same server):
    a source.md paragraph (or several) highlighted in its chapter, a summary's paragraph on its
    page; None for a path that is not a corpus node."""
    found = split_source_file(source_file)
    if found is None:
        return None
    book, folder, name = found
    numbers = [paragraphs] if isinstance(paragraphs, int) else sorted(set(paragraphs or ()))
    url = base.rstrip("/") + page_path(book, folder)
    if not numbers:
        return url
    if name == "source.md":
        return f"{url}?hl={compress(numbers)}#p{numbers[0]}"
    return f"{url}#summary-{numbers[0]}"


def shows_paragraph(url: SplitResult) -> bool:
    """Whether a page address points at a chapter's paragraphs (`?hl=…` or `#pN`: its source.md) rather
    than at the page itself or a summary paragraph (`#summary-N`: its summary.md)."""
    return "hl=" in url.query or re.fullmatch(r"p\d+", url.fragment) is not None


def node_of_url(text: str) -> str | None:
    """The source_file a reading-room URL shows (citation_url's form, with or without its scheme and host:
    `/books/<book>/<folder>`); None for any other text."""
    url = urlsplit(text.strip())
    path = unquote(url.path)
    folder = path.split("books/", 1)[1].strip("/") if path.startswith(("/books/", "books/")) else ""
    return f"corpus/{folder}/{'source.md' if shows_paragraph(url) else 'summary.md'}" if folder else None
