"""Citation anchors in summaries: `[§12]`, `[§12–14]`, `[§3, §27]` (format: docs/anchors.md).

An anchor ends a summary sentence and names the units of the node's children that the sentence
condenses, numbered from 1 in document order:
  level 1  the paragraphs of the section's source.md (blank-line separated, as `prepare` writes
           them and `loader.chunking.paragraphs` reads them: footnote paragraphs count);
  level 2  the node's children summaries in manifest order: a part's sections, a chapter's
           sub-sections (level 1, or level 2 when they have sub-sections of their own);
  level 3  the book's children (front matter, then parts), in manifest order.
Anchors name paragraphs, never chunk indices, so they survive a change of chunking threshold.
They are stripped from the text that is embedded, indexed and counted.

    python -m loader.anchors show corpus/<book>/…/summary.md   # the numbered units it can cite
    python -m loader.anchors check corpus/<book>/…/summary.md  # problems, with file:line
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bookrag.errors import BookragError

MAX_SPAN = 5  # an anchor range covering more units tells a reader nothing precise

#: Anything in square brackets that starts with § is an anchor, well-formed or not.
_CANDIDATE = re.compile(r"[ \t]*\[§([^\]\n]*)\]")
_ITEM = re.compile(r"^§?(\d+)(?:\s*[–-]\s*§?(\d+))?$")
#: A sentence ends with . ! ? or … (closing quotes/brackets may follow) before whitespace and a
#: capital, an opening quote or the end; a common French abbreviation before the dot does not end it.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[»”)\]]*(?=\s+[«“(A-ZÀ-ÖØ-Þ0-9]|\s*$)")
_ABBREVIATIONS = (
    "M.",
    "MM.",
    "Mme.",
    "Mgr.",
    "St.",
    "cf.",
    "ch.",
    "chap.",
    "p.",
    "t.",
    "vol.",
    "etc.",
    "J.-B.",
    "J.",
    "A.",
    "B.",
    "C.",
    "D.",
    "E.",
    "F.",
    "G.",
    "H.",
    "L.",
    "N.",
    "P.",
    "R.",
    "S.",
    "T.",
    "V.",
)


class AnchorError(BookragError):
    """A malformed anchor; the message names the anchor and its offset."""


@dataclass(frozen=True)
class Anchor:
    start: int  # offset of the anchor (including the space before it) in the text
    end: int
    raw: str  # as written, e.g. "[§12–14]"
    units: tuple[int, ...]  # every unit cited, expanded and sorted


def _parse(inner: str, raw: str) -> tuple[int, ...]:
    units: set[int] = set()
    for item in inner.split(","):
        m = _ITEM.match(item.strip())
        if not m:
            raise AnchorError(f"malformed anchor {raw}: expected [§N], [§N–M] or [§N, §M]")
        first = int(m[1])
        last = int(m[2]) if m[2] else first
        if first < 1:
            raise AnchorError(f"malformed anchor {raw}: units are numbered from 1")
        if last < first:
            raise AnchorError(f"malformed anchor {raw}: the range {first}–{last} runs backwards")
        if last - first + 1 > MAX_SPAN:
            raise AnchorError(
                f"anchor {raw} spans {last - first + 1} units; at most {MAX_SPAN} (cite the precise ones)"
            )
        units.update(range(first, last + 1))
    return tuple(sorted(units))


def find_anchors(text: str) -> list[Anchor]:
    """Every anchor of a text; raises AnchorError on the first malformed one."""
    return [
        Anchor(m.start(), m.end(), m.group(0).strip(), _parse(m[1], m.group(0).strip()))
        for m in _CANDIDATE.finditer(text)
    ]


def strip_anchors(text: str) -> str:
    """The text without its anchors (and the space before each): what is embedded and indexed."""
    return _CANDIDATE.sub("", text)


def cited_units(text: str) -> tuple[int, ...]:
    return tuple(sorted({u for a in find_anchors(text) for u in a.units}))


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs of a paragraph, anchors kept (the splitter ignores them)."""
    out: list[tuple[int, str]] = []
    last = 0
    for m in _SENTENCE_END.finditer(text):
        head = text[last : m.end()]
        words = head.split()
        if words and any(words[-1].endswith(a) and len(words[-1]) <= len(a) + 1 for a in _ABBREVIATIONS):
            continue
        if head.strip():
            out.append((last + len(head) - len(head.lstrip()), head.strip()))
        last = m.end()
    if text[last:].strip():
        tail = text[last:]
        out.append((last + len(tail) - len(tail.lstrip()), tail.strip()))
    return out


def anchored_sentences(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """(sentence without its anchors, units it cites) for every sentence of a summary text that
    carries an anchor, in order: the rows of the sentence branch (docs/anchors.md)."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for line in text.split("\n"):
        for _off, sentence in sentences(line):
            units = cited_units(sentence)
            plain = strip_anchors(sentence).strip()
            if units and plain:
                out.append((plain, units))
    return out


@dataclass(frozen=True)
class Problem:
    line: int  # line in the .md file (1-based, frontmatter included)
    message: str

    def at(self, path: Path | str) -> str:
        return f"{path}:{self.line}: {self.message}"


def check_body(body: str, first_line: int, unit_count: int, every_sentence: bool) -> list[Problem]:
    """Problems of a summary body whose anchors cite units 1..unit_count. `first_line` is the
    file line the body starts on; every_sentence: each sentence needs an anchor (level 1)."""
    problems: list[Problem] = []
    offset = 0
    for i, line in enumerate(body.split("\n")):
        lineno = first_line + i
        try:
            anchors = find_anchors(line)
        except AnchorError as exc:
            problems.append(Problem(lineno, str(exc)))
            offset += len(line) + 1
            continue
        for a in anchors:
            beyond = [u for u in a.units if u > unit_count]
            if beyond:
                problems.append(
                    Problem(lineno, f"anchor {a.raw} cites §{beyond[0]}, beyond the last (§{unit_count})")
                )
        if every_sentence and line.strip():
            for _off, sentence in sentences(line):
                if not _CANDIDATE.search(sentence):
                    short = sentence if len(sentence) <= 80 else sentence[:77] + "…"
                    problems.append(Problem(lineno, f"sentence without an anchor: {short!r}"))
        offset += len(line) + 1
    return problems


# --- units a summary may cite --------------------------------------------------------------


def units_of(home: Path, source_file: str) -> list[str]:
    """The numbered units a summary file may cite (texts or child paths), in order."""
    from loader import frontmatter
    from loader.chunking import paragraphs
    from loader.manifest import book_tree, find_book

    book_slug = source_file.split("/")[1]
    book = find_book(home / "corpus", book_slug)
    nodes = book_tree(book)
    node = next((n for n in nodes if n.source_file == source_file), None)
    if node is None or node.node_type != "summary":
        raise BookragError(f"{source_file}: not a summary of {book_slug}'s manifest")
    if node.level == 1:
        src = home / node.folder / "source.md"
        if not src.exists():
            raise BookragError(f"{src}: missing; run `bookrag prepare {book_slug}` first")
        return paragraphs(frontmatter.read(src)[1])
    return [n.source_file for n in nodes if n.parent_source_file == source_file and n.node_type == "summary"]


def check_file(home: Path, path: Path) -> list[str]:
    from loader import frontmatter

    text = path.read_text(encoding="utf-8")
    meta, body = frontmatter.split(text, path)
    rel = path.resolve().relative_to(home.resolve()).as_posix()
    units = units_of(home, rel)
    first_line = text[: len(text) - len(body)].count("\n") + 1
    return [
        p.at(rel) for p in check_body(body, first_line, len(units), every_sentence=meta.get("level") == 1)
    ]


def _main(argv: list[str]) -> int:
    from bookrag.config import DEFAULT_HOME

    if len(argv) < 2 or argv[0] not in ("show", "check"):
        print(__doc__.strip().splitlines()[-2:][0].strip(), file=sys.stderr)
        return 2
    home = DEFAULT_HOME
    status = 0
    for name in argv[1:]:
        path = Path(name).resolve()
        rel = path.relative_to(home.resolve()).as_posix()
        if argv[0] == "show":
            for i, unit in enumerate(units_of(home, rel), 1):
                print(f"§{i}  {unit}\n")
        else:
            problems = check_file(home, path)
            from loader import frontmatter

            body = frontmatter.read(path)[1]
            n = len(units_of(home, rel))
            cited = cited_units(body) if not problems else ()
            words = len(strip_anchors(body).split())
            for p in problems:
                print(p)
            print(f"{rel}: {len(problems)} problems, {words} words, cites {len(cited)}/{n} units")
            status |= bool(problems)
    return status


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
