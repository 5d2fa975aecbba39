"""YAML frontmatter of corpus .md files: read (python-frontmatter's YAML handler), validate,
write. Errors name the file and the line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import frontmatter as _library
import yaml

from bookrag.errors import BookragError

#: Fields every corpus .md carries (summaries add provenance fields, see loader.summarize).
REQUIRED = ("book", "title", "heading_path", "level", "node_type", "parent_source_file", "embed")

#: python-frontmatter's YAML handler: its '---' boundaries and yaml.SafeLoader. Its `parse`
#: is not used: it strips the body, and callers count the body's lines from the end of the file.
_YAML = _library.YAMLHandler()


def split(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a .md; the body is the end of the text exactly (from its first
    non-blank line), so text[: len(text) - len(body)] is all that comes before it. Errors name the
    file and line (a YAML error's line in the file, counting the opening '---' as line 1)."""
    opening = _YAML.FM_BOUNDARY.match(text) if _YAML.FM_BOUNDARY else None
    if opening is None:
        raise BookragError(f"{path}:1: no YAML frontmatter (the file must start with a '---' line)")
    try:
        head, body = _YAML.split(text)
    except ValueError:
        raise BookragError(f"{path}:1: frontmatter is not closed by a '---' line") from None
    try:
        # Without the line break that ends the head, an error at its end is on its last line; the
        # Python SafeLoader (the handler's default is libyaml's, whose marks point further on).
        meta = _YAML.load(head.removesuffix("\n"), Loader=yaml.SafeLoader) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        first = text[: opening.end()].count("\n") + 1  # the file line the head's first line is on
        line = first + mark.line if mark is not None else 1
        raise BookragError(
            f"{path}:{line}: invalid YAML frontmatter: {getattr(exc, 'problem', exc)}"
        ) from exc
    if not isinstance(meta, dict):
        raise BookragError(f"{path}:2: frontmatter must be a mapping of fields")
    return meta, body.lstrip("\n")


def read(path: Path) -> tuple[dict[str, Any], str]:
    return split(path.read_text(encoding="utf-8"), path)


def validate(meta: dict[str, Any], path: Path | str) -> None:
    missing = [f for f in REQUIRED if f not in meta]
    if missing:
        raise BookragError(f"{path}:1: frontmatter lacks {', '.join(missing)}")
    if meta["node_type"] not in ("source", "summary"):
        raise BookragError(f"{path}:1: node_type must be source or summary, got {meta['node_type']!r}")
    if not isinstance(meta["level"], int) or not 0 <= meta["level"] <= 3:
        raise BookragError(f"{path}:1: level must be an integer 0..3, got {meta['level']!r}")
    if (meta["node_type"] == "source") != (meta["level"] == 0):
        raise BookragError(f"{path}:1: level 0 is for source files and levels 1-3 for summaries")
    if not isinstance(meta["embed"], bool):
        raise BookragError(f"{path}:1: embed must be true or false, got {meta['embed']!r}")


def render(meta: dict[str, Any], body: str) -> str:
    """The .md text: the fields in their order, one per line (no wrapping), then the body."""
    head = _YAML.export(meta, sort_keys=False, width=10_000)
    return f"---\n{head}\n---\n{body.strip()}\n"


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename: a reader (or Ctrl-C) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
