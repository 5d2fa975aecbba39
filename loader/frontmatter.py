"""YAML frontmatter of corpus .md files: read, validate, write."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bookrag.errors import BookragError

#: Fields every corpus .md carries (summaries add provenance fields, see loader.summarize).
REQUIRED = ("book", "title", "heading_path", "level", "node_type", "parent_source_file", "embed")


def split(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a .md; errors name the file and line."""
    if not text.startswith("---\n"):
        raise BookragError(f"{path}:1: no YAML frontmatter (the file must start with a '---' line)")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise BookragError(f"{path}:1: frontmatter is not closed by a '---' line")
    try:
        meta = yaml.safe_load(text[4:end]) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise BookragError(
            f"{path}:{line}: invalid YAML frontmatter: {getattr(exc, 'problem', exc)}"
        ) from exc
    if not isinstance(meta, dict):
        raise BookragError(f"{path}:2: frontmatter must be a mapping of fields")
    return meta, text[end + 5 :]


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
    head = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=10_000)
    return f"---\n{head}---\n{body.strip()}\n"


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
