"""The author's own summaries (issue 36, decision 0035): the indented run of phrases separated by
" -- " that opens most chapters and sub-sections of Tocqueville's 1835 volumes ("Il faut faire
une grande division entre les partis. -- Partis qui sont entre eux comme des nations rivales. --
…"), the author's abstract of what follows.

Recognised in the raw text (`is_summary_block`, by loader.importers.gutenberg): a block of lines
every one indented, holding at least one separator (a phrase's end, then `--`), that opens the
section or follows a heading in capitals (a footnote on that heading may come between). It stays
a paragraph of its own; `prepare` lists its paragraph numbers in the source.md frontmatter
(`author_summaries: [1, 14]`), `sidecars` marks those chunks `"kind": "author_summary"`, `load`
writes the column `kind` (rag.hierarchical_content_nodes), and the summary providers read them
first (loader.summarize).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bookrag.errors import BookragError

#: The source.md frontmatter field: the 1-based paragraphs that are the author's summaries.
FIELD = "author_summaries"
#: The sidecar chunk field and the database column, and the value marking such a chunk.
KIND = "author_summary"
#: The value marking every chunk of a summary the extractive provider wrote (its frontmatter's
#: `generator: extractive`): the author's sentences, chosen and arranged by a program, so a reader
#: quotes the paragraphs it cites, never it (decision 0040). Summary rows only.
EXTRACTIVE = "extractive_summary"
KINDS = ("text", KIND, EXTRACTIVE)

#: A separator between two phrases: the end of one (. ? ! ;) then `--` (Gutenberg's dash).
_SEPARATOR = re.compile(r"[.?!;»]\s*--\s*\S")
#: A table of contents line ("CHAPITRE I.--De la méthode …   1"): never a summary.
_CONTENTS = re.compile(r"^\s*(?:CHAP|CHAPITRE|LIVRE|PARTIE)\b|\s\d+\s*$")


def is_summary_block(lines: list[str]) -> bool:
    """Whether a blank-line separated block of raw lines has the form of an author's summary:
    every line indented (three spaces or more), a separator between phrases, no footnote, no
    table-of-contents line. Where it stands (after a heading) is the caller's rule."""
    text = [ln for ln in lines if ln.strip()]
    if not text or not all(ln.startswith("   ") for ln in text):
        return False
    if text[0].strip().startswith("[") or any(_CONTENTS.search(ln) for ln in text):
        return False
    return _SEPARATOR.search(" ".join(ln.strip() for ln in text)) is not None


def is_heading_block(lines: list[str]) -> bool:
    """A heading in capitals: a short block whose letters are all upper case."""
    text = " ".join(ln.strip() for ln in lines if ln.strip())
    letters = [c for c in text if c.isalpha()]
    return 0 < len(lines) <= 4 and len(letters) >= 4 and all(c.isupper() for c in letters)


def phrases(text: str) -> list[str]:
    """The phrases of an author's summary as prepared (Gutenberg's `--` became an em dash)."""
    return [p.strip() for p in re.split(r"\s+—\s*|\s*—\s+", text) if p.strip()]


def paragraphs_of(meta: dict[str, Any], path: Path | str, count: int | None = None) -> list[int]:
    """The paragraph numbers a source.md's frontmatter marks as the author's summaries ([] when
    absent); a malformed field names the file and its line."""
    value = meta.get(FIELD)
    if value is None:
        return []
    where = f"{path}:{_field_line(path)}"
    if meta.get("node_type") != "source":
        raise BookragError(f"{where}: {FIELD} on a summary; only a source.md holds the author's summaries")
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
        or value != sorted(set(value))
    ):
        raise BookragError(
            f"{where}: {FIELD} must be a non-empty, sorted list of distinct paragraph numbers "
            f"(1-based), got {value!r}"
        )
    if count is not None and value[-1] > count:
        raise BookragError(f"{where}: {FIELD} names paragraph {value[-1]}, but the body has {count}")
    return value


def _field_line(path: Path | str) -> int:
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except OSError:
        return 1
    return next((k for k, ln in enumerate(lines, start=1) if ln.startswith(f"{FIELD}:")), 1)
