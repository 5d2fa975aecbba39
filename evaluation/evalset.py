"""Evalsets: JSONL, one question per line (format in docs/evalsets.md).

{"id": "bastiat-007", "question": "...", "kind": "lexical" | "paraphrase" | "synthesis",
 "expected_files": ["corpus/<book>/.../source.md", ...], "answers": ["verbatim fragment", ...],
 "note": "optional"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bookrag.errors import BookragError

KINDS = ("lexical", "paraphrase", "synthesis")


@dataclass(frozen=True)
class EvalItem:
    id: str
    question: str
    kind: str
    expected_files: tuple[str, ...]
    answers: tuple[str, ...]
    note: str = ""

    @property
    def book(self) -> str:
        return self.expected_files[0].split("/")[1]


def load_evalset(path: Path) -> list[EvalItem]:
    items: list[EvalItem] = []
    seen: set[str] = set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise BookragError(f"{path}: evalset not found") from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            item = EvalItem(
                str(obj["id"]),
                obj["question"],
                obj["kind"],
                tuple(obj["expected_files"]),
                tuple(obj["answers"]),
                obj.get("note", ""),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BookragError(f"{path}:{n}: not a valid evalset line ({exc})") from exc
        if item.kind not in KINDS:
            raise BookragError(f"{path}:{n}: kind must be one of {', '.join(KINDS)}, got {item.kind!r}")
        if not item.expected_files or not item.answers or not item.question.strip():
            raise BookragError(f"{path}:{n}: question, expected_files and answers must not be empty")
        if item.id in seen:
            raise BookragError(f"{path}:{n}: duplicate id {item.id!r}")
        seen.add(item.id)
        items.append(item)
    if not items:
        raise BookragError(f"{path}: empty evalset")
    return items
