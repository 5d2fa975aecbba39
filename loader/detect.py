"""Find a book's structure in its plain text: parts, chapters, front matter, and the table of
contents to check them against. Pure functions over lists of lines (the text between the
Gutenberg markers); `loader/propose.py` reads the file and writes the manifest.

The rules are typographic, never about one book:

- **Chapters** are standalone lines in one of three styles: a label (`CHAPITRE IV.`, `CHAP. Ier`,
  `CHAPTER 4`) with the title in the next block; a number and an upper-case title on one line
  (`IV.--ÉGALISER LES CONDITIONS`); a bare number line followed by an upper-case title block
  (`IV` then `ÉCHANGE`). The style with the most candidates wins; the others stay in the text.
  Within a part, numbers must grow (a line that would go back is dialogue, not a heading).
- **Parts** are an ordinal and a noun (`DEUXIÈME SÉRIE`, `LIVRE II`, `PART TWO`). The noun that
  occurs at least twice and most often gives the parts; a noun seen once (a volume's
  `PREMIÈRE PARTIE` around a whole work) only names the book.
- **Front matter** is a known name (Avertissement, Préface, Introduction…) or an upper-case
  heading listed in the contents, before the first part or chapter. Inside a part, a known name
  is a section of that part; text of at least 50 words between a part heading and its first
  chapter is the part's untitled introduction.
- **Ends**: a `FIN …` line closes the current part (or the book); notes, appendix and table after
  it are left out. A run of upper-case blocks that repeat elsewhere (a half-title page) is cut
  off the end of front matter and parts.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field, replace

from rapidfuzz import fuzz

ROMAN = r"[IVXLCDM]+"
NUMBER = rf"(?:{ROMAN}|\d+|PREMIER|1ER|IER|1RE)"
MARKER = r"(?:\[\w+(?:-\w+)?\])*"  # footnote markers in headings: [1], [TN-A]
ORDINALS = {
    "premier": 1,
    "première": 1,
    "premiere": 1,
    "deuxième": 2,
    "deuxieme": 2,
    "second": 2,
    "seconde": 2,
    "troisième": 3,
    "troisieme": 3,
    "quatrième": 4,
    "quatrieme": 4,
    "cinquième": 5,
    "cinquieme": 5,
    "sixième": 6,
    "sixieme": 6,
    "septième": 7,
    "septieme": 7,
    "huitième": 8,
    "huitieme": 8,
    "neuvième": 9,
    "neuvieme": 9,
    "dixième": 10,
    "dixieme": 10,
    "first": 1,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
PART_NOUNS = ("partie", "série", "serie", "livre", "section", "époque", "epoque", "part", "book")
_ORD = "|".join(sorted(ORDINALS, key=len, reverse=True))
_NOUN = "|".join(PART_NOUNS)
PART_RE = re.compile(
    rf"^(?:(?P<ord>{_ORD})\s+(?P<noun>{_NOUN})|(?P<noun2>{_NOUN})\s+(?P<num>{ROMAN}|\d+|{_ORD})){MARKER}\.?{MARKER}$",
    re.I,
)
LABEL_RE = re.compile(
    rf"^(?:CHAPITRE|CHAP\.?|CHAPTER)\s+(?P<num>{NUMBER})\b\.?{MARKER}\.?\s*(?:(?:--|—|-|\.|:)\s*(?P<title>.+))?$",
    re.I,
)
NUMBERED_RE = re.compile(rf"^(?P<num>{ROMAN}|\d+)\s*\.?\s*(?:--|—|\.)\s*(?P<title>\S.*)$")
BARE_RE = re.compile(rf"^(?P<num>{ROMAN}|\d+)\.?$")


def number_only(heading: str) -> bool:
    """Whether a heading is a label and a number and nothing of its subject (« Chapitre XIV »,
    « LIVRE II. », « 3. »), as the patterns above read headings."""
    s = heading.strip()
    label = LABEL_RE.match(s)
    return bool((label and not label.group("title")) or PART_RE.match(s) or BARE_RE.match(s))


NAMES = {
    "avertissement": "front-matter",
    "préface": "front-matter",
    "preface": "front-matter",
    "avant-propos": "front-matter",
    "dédicace": "front-matter",
    "prologue": "front-matter",
    "foreword": "front-matter",
    "introduction": "introduction",
    "conclusion": "conclusion",
    "épilogue": "conclusion",
    "epilogue": "conclusion",
    "afterword": "conclusion",
}
NAMED_RE = re.compile(rf"^(?P<name>{'|'.join(NAMES)})\b(?P<rest>[^a-zà-ÿ]*){MARKER}$", re.I)
BACK_RE = re.compile(r"^(?:NOTES?|APPENDICES?|APPENDIX|INDEX|ERRATA|BIBLIOGRAPHIE|BIBLIOGRAPHY)\b[^a-zà-ÿ]*$")
END_RE = re.compile(r"^(?:FIN\b[^a-zà-ÿ]*|THE END\.?)$")
TOC_RE = re.compile(
    r"^(?:TABLE(?: DES MATIÈRES| ANALYTIQUE)?|SOMMAIRE|CONTENTS|TABLE OF CONTENTS)\b[^a-zà-ÿ]*$", re.I
)
TOC_END_RE = re.compile(r"^FIN DE LA TABLE", re.I)
PAGE_RE = re.compile(r"^(?P<text>.*?)[\s.]+(?P<page>\d+)$")
IB_RE = re.compile(
    r"^(?P<text>.*?)\s+(?P<page>_?Ib(?:id)?\._?)$"
)  # "… _Ib._": the same page as the entry above
TOC_CHAPTER_RE = re.compile(
    rf"^(?:(?:CHAPITRE|CHAP\.?|CHAPTER)\s+|(?:--|—)\s*)?(?P<num>{NUMBER})\b\.?\s*(?:--|—|-|\.)?\s*(?P<title>[^\W\d_].*)$",
    re.I,
)


@dataclass(frozen=True)
class Candidate:
    """A line that looks like a heading."""

    file: str
    line: int  # index in the file's text lines
    kind: str  # part | chapter | named | end | back
    style: str = ""  # chapters: label | numbered | bare; parts: the noun; named: the name
    number: int | None = None
    title: str = ""  # as printed (upper case kept), from the line or the blocks after it
    heading_blocks: int = 1
    subtitle: str | None = None


@dataclass(frozen=True)
class TocEntry:
    text: str
    kind: str  # part | chapter | named | other
    number: int | None
    title: str
    part: int  # index of the part entry it follows (-1 before any)
    indent: int = 0  # spaces before its first line: a sub-section is indented under its chapter
    line: int = -1  # its first line in the file's text lines
    file: str = ""  # the file whose contents list it


@dataclass
class Section:
    kind: str  # chapter | introduction | conclusion | front-matter
    label: str
    title: str
    number: int | None
    file: str
    line: int  # heading line
    body: int  # first body line
    end: int  # first line after the section
    start: str  # the heading line, stripped (the manifest's `start`)
    heading_blocks: int
    words: int = 0
    sections: list[Section] = field(default_factory=list)  # sub-sections (find_subsections)


@dataclass
class Part:
    label: str
    title: str
    subtitle: str | None
    number: int | None
    file: str
    line: int
    end: int
    start: str
    heading_blocks: int
    sections: list[Section] = field(default_factory=list)
    end_marker: bool = False  # the part ends at a `FIN …` line (else at the next heading)
    appended: bool = False  # documents appended to the volume (find_appended), not a part of the work


@dataclass
class Structure:
    title: str | None  # a title the text gives itself (half-title, the single wrapper heading)
    front_matter: list[Section]
    parts: list[Part]
    toc: list[TocEntry]
    warnings: list[str]
    left_out: list[tuple[str, int, int, int]]  # (file, first line, end, words) outside the tree
    offsets: dict[str, int] = field(default_factory=dict)  # raw line number of each file's line 0


# --- small text helpers -------------------------------------------------------------------


def roman_to_int(text: str) -> int | None:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    text = text.upper()
    if not text or any(c not in values for c in text):
        return None
    total = 0
    for i, c in enumerate(text):
        v = values[c]
        total += -v if i + 1 < len(text) and values[text[i + 1]] > v else v
    return total


def int_to_roman(n: int) -> str:
    out = ""
    for v, s in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while n >= v:
            out, n = out + s, n - v
    return out


def parse_number(text: str) -> int | None:
    t = text.strip(". ").lower()
    if t.isdigit():
        return int(t)
    if t in ("premier", "1er", "ier", "1re"):
        return 1
    if t in ORDINALS:
        return ORDINALS[t]
    return roman_to_int(t)


def strip_markers(text: str) -> str:
    return re.sub(r"\s*\[\w+(?:-\w+)?\]", "", text).strip()


def is_upper(text: str) -> bool:
    """Every cased letter upper case, and at least two letters."""
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 2 and all(not c.islower() for c in letters)


def normalize(text: str) -> str:
    """For comparing titles: markers, accents, case and punctuation ignored."""
    text = unicodedata.normalize("NFKD", strip_markers(text).replace("œ", "oe").replace("Œ", "OE"))
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return " ".join(re.findall(r"[a-z0-9]+", text))


def clean_title(text: str) -> str:
    """A printed heading as a title: markers, underscores and the final period dropped,
    sentence case when it was all upper case."""
    t = re.sub(r"\s+", " ", strip_markers(text).replace("_", "")).strip()
    t = t.replace("--", "—").rstrip(" .")
    if is_upper(t):
        t = t.lower()
        t = t[0].upper() + t[1:] if t else t
    return t


def count_words(lines: list[str]) -> int:
    return sum(len(re.findall(r"\w+", re.sub(r"\[Note \w+:|\[\^?\w+\]", " ", line))) for line in lines)


def text_blocks(lines: list[str], i: int, stop: int | None = None) -> list[tuple[int, int]]:
    """Blank-line separated blocks from line i on: (first, end) pairs, up to `stop`."""
    out, n = [], stop if stop is not None else len(lines)
    while i < n:
        while i < n and not lines[i].strip():
            i += 1
        if i >= n:
            break
        j = i
        while j < n and lines[j].strip():
            j += 1
        out.append((i, j))
        i = j
    return out


def skip_blocks(lines: list[str], i: int, blocks: int) -> int:
    """First line after `blocks` non-blank blocks from i (what `bookrag prepare` does)."""
    for _ in range(blocks):
        while i < len(lines) and not lines[i].strip():
            i += 1
        while i < len(lines) and lines[i].strip():
            i += 1
    return i


def _standalone(lines: list[str], i: int) -> bool:
    return (i == 0 or not lines[i - 1].strip()) and (i + 1 >= len(lines) or not lines[i + 1].strip())


# --- table of contents --------------------------------------------------------------------


def toc_ranges(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) of each table of contents: its heading to `FIN DE LA TABLE`, or to the
    last block that still looks like entries."""
    out: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        s = line.strip()
        if not (s and TOC_RE.match(s) and _standalone(lines, i)) or any(a <= i < b for a, b in out):
            continue
        end, last = None, i + 1
        for a, b in text_blocks(lines, i + 1):
            text = " ".join(x.strip() for x in lines[a:b])
            if TOC_END_RE.match(text):
                end = b
                break
            if len(text.split()) > 40 and not PAGE_RE.match(lines[b - 1].strip()):
                break
            last = b
        out.append((i, end if end is not None else last))
    return out


def parse_toc(lines: list[str], first: int, end: int, part_noun: str | None) -> list[TocEntry]:
    entries: list[TocEntry] = []
    part = -1
    pending: list[str] = []
    at = (0, -1)  # (indent, line) of the pending entry's first line
    for i, line in enumerate(lines[first + 1 : end], start=first + 1):
        s = line.strip()
        if not s:
            if pending and not PAGE_RE.match(pending[-1]):
                entries += _toc_entry(" ".join(pending), None, part_noun, part, at)
                part = _part_after(entries, part)
            pending = []
            continue
        if not pending:
            at = (len(line) - len(line.lstrip()), i)
        pending.append(s)
        m = PAGE_RE.match(s) or IB_RE.match(s)
        if m and not TOC_END_RE.match(s):
            text = " ".join(pending[:-1] + [m.group("text")]).strip(" .")
            page = int(m.group("page")) if m.group("page").isdigit() else 0
            entries += _toc_entry(text, page, part_noun, part, at)
            part = _part_after(entries, part)
            pending = []
    return [e for e in entries if not TOC_END_RE.match(e.text)]


def _part_after(entries: list[TocEntry], part: int) -> int:
    return part + 1 if entries and entries[-1].kind == "part" and entries[-1].part == part else part


def _toc_entry(
    text: str, page: int | None, part_noun: str | None, part: int, at: tuple[int, int] = (0, -1)
) -> list[TocEntry]:
    plain = strip_markers(text.replace("_", "")).strip(" .")
    indent, line = at
    m = PART_RE.match(plain)
    if m and (part_noun is None or _noun(m) == part_noun):
        return [TocEntry(plain, "part", _part_number(m), clean_title(plain), part, indent, line)]
    if page is None:  # an unpaged line: a part's subtitle or a heading of the table itself
        return []
    m = TOC_CHAPTER_RE.match(plain)
    if m and parse_number(m.group("num")) is not None:
        return [
            TocEntry(
                plain,
                "chapter",
                parse_number(m.group("num")),
                clean_title(m.group("title")),
                part,
                indent,
                line,
            )
        ]
    m = NAMED_RE.match(plain)
    if m:
        return [TocEntry(plain, "named", None, clean_title(plain), part, indent, line)]
    return [TocEntry(plain, "other", None, clean_title(plain), part, indent, line)]


# --- candidates ---------------------------------------------------------------------------


def _noun(m: re.Match) -> str:
    noun = (m.group("noun") or m.group("noun2")).lower()
    return {"serie": "série", "epoque": "époque"}.get(noun, noun)


def _part_number(m: re.Match) -> int | None:
    return ORDINALS.get(m.group("ord").lower()) if m.group("ord") else parse_number(m.group("num"))


def _title_blocks(lines: list[str], i: int, first_any: bool) -> tuple[list[str], int]:
    """The title printed in the blocks after a label-only heading at line i: the first block
    (any case when `first_any`, e.g. an indented title line), then further upper-case blocks."""
    titles: list[str] = []
    for a, b in text_blocks(lines, i + 1)[:4]:
        text = " ".join(x.strip() for x in lines[a:b])
        if b - a > 4 or text.startswith("[Note") or BARE_RE.match(text) or LABEL_RE.match(text):
            break
        if not is_upper(text) and not (first_any and not titles):
            break
        titles.append(text)
        if not is_upper(text):
            break
    return titles, 1 + len(titles)


def find_candidates(file: str, lines: list[str], skip: list[tuple[int, int]]) -> list[Candidate]:
    out: list[Candidate] = []
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or (i > 0 and lines[i - 1].strip()) or any(a <= i < b for a, b in skip) or len(s) > 100:
            continue
        single = i + 1 >= len(lines) or not lines[i + 1].strip()
        if (m := PART_RE.match(s)) and single:
            subtitle, blocks, titles = None, 1, []
            for a, b in text_blocks(lines, i + 1)[:3]:
                text = " ".join(x.strip() for x in lines[a:b])
                if (
                    b - a <= 3
                    and is_upper(text)
                    and not (
                        PART_RE.match(text)
                        or LABEL_RE.match(text)
                        or NUMBERED_RE.match(text)
                        or BARE_RE.match(text)
                    )
                ):
                    titles.append(text)
                elif not titles and b - a == 1 and re.fullmatch(r"\(.{1,40}\)", text):  # "(2e édition.)"
                    blocks = 2
                    break
                else:
                    break
            if titles:
                subtitle, blocks = " ".join(titles), 1 + len(titles)
            out.append(Candidate(file, i, "part", _noun(m), _part_number(m), s, blocks, subtitle))
        elif (m := LABEL_RE.match(s)) and parse_number(m.group("num")) is not None:
            if m.group("title"):
                out.append(
                    Candidate(file, i, "chapter", "label", parse_number(m.group("num")), m.group("title"), 1)
                )
            else:
                titles, blocks = _title_blocks(lines, i, first_any=True)
                out.append(
                    Candidate(
                        file, i, "chapter", "label", parse_number(m.group("num")), " ".join(titles), blocks
                    )
                )
        elif (m := NUMBERED_RE.match(s)) and is_upper(m.group("title")) and roman_or_int(m.group("num")):
            out.append(
                Candidate(file, i, "chapter", "numbered", parse_number(m.group("num")), m.group("title"), 1)
            )
        elif (m := BARE_RE.match(s)) and single and roman_or_int(m.group("num")):
            titles, blocks = _title_blocks(lines, i, first_any=False)
            if titles:
                out.append(
                    Candidate(
                        file, i, "chapter", "bare", parse_number(m.group("num")), " ".join(titles), blocks
                    )
                )
        elif (m := NAMED_RE.match(s)) and is_upper(s) and single:
            out.append(Candidate(file, i, "named", m.group("name").lower(), None, s, 1))
        elif END_RE.match(s) and single:
            out.append(Candidate(file, i, "end", title=s))
        elif BACK_RE.match(s) and single:
            out.append(Candidate(file, i, "back", title=s))
    return out


def roman_or_int(text: str) -> bool:
    return text.isdigit() or roman_to_int(text) is not None


def upper_headings(file: str, lines: list[str], start: int, stop: int) -> list[Candidate]:
    """Upper-case one- or two-line blocks followed by at least 100 words of prose: front matter
    with a title of its own ("À LA JEUNESSE FRANÇAISE"), between `start` and `stop`."""
    out = []
    blocks = text_blocks(lines, start, stop)
    for k, (a, b) in enumerate(blocks):
        text = " ".join(x.strip() for x in lines[a:b])
        if b - a > 2 or not is_upper(text) or len(text) > 100:
            continue
        prose = 0
        for c, d in blocks[k + 1 :]:
            t = " ".join(x.strip() for x in lines[c:d])
            if is_upper(t):
                break
            prose += count_words(lines[c:d])
        if prose >= 100:
            out.append(Candidate(file, a, "named", "", None, text, 1))
    return out


# --- the structure ------------------------------------------------------------------------


def _repeated_blocks(lines: list[str]) -> set[str]:
    seen = Counter(normalize(" ".join(x.strip() for x in lines[a:b])) for a, b in text_blocks(lines, 0))
    return {k for k, v in seen.items() if v >= 2 and k}


def trim_half_title(lines: list[str], start: int, end: int, repeated: set[str]) -> int:
    """`end` moved back over trailing upper-case blocks that repeat elsewhere (half-titles)."""
    blocks = text_blocks(lines, start, end)
    cut = end
    for a, b in reversed(blocks[1:]):
        text = " ".join(x.strip() for x in lines[a:b])
        if is_upper(text) and normalize(text) in repeated:
            cut = a
        else:
            break
    return cut


def _prose_words(lines: list[str], a: int, b: int) -> int:
    """Words of plain prose in lines[a:b]: footnotes, indented quotations and parenthesised
    lines (epigraphs, attributions) are not counted."""
    words, depth = 0, 0
    for line in lines[a:b]:
        s = line.strip()
        if depth > 0 or s.startswith("[Note"):
            depth = max(0, depth + s.count("[") - s.count("]"))
            continue
        if line.startswith("    ") or (s.startswith("(") and s.endswith(")")):
            continue
        words += count_words([s])
    return words


def _choose_chapters(cands: list[Candidate], parts: list[Candidate]) -> list[Candidate]:
    """The chapter style with the most candidates; within each part, numbers that grow
    (preferring the next number when a later candidate has it)."""
    chapters = [c for c in cands if c.kind == "chapter"]
    if not chapters:
        return []
    styles = Counter(c.style for c in chapters)
    style = max(styles, key=lambda s: (styles[s], s == "label"))
    chapters = [c for c in chapters if c.style == style]
    bounds = [(p.file, p.line) for p in parts]
    order = {f: k for k, f in enumerate(dict.fromkeys(c.file for c in cands))}

    def segment(c: Candidate) -> int:
        return sum(1 for f, line in bounds if (order[f], line) < (order[c.file], c.line))

    kept: list[Candidate] = []
    last: dict[int, int] = {}
    for k, c in enumerate(chapters):
        seg, prev = segment(c), last.get(segment(c), 0)
        if c.number is None or c.number <= prev:
            continue
        if c.number != prev + 1 and any(
            segment(d) == seg and d.number == prev + 1 for d in chapters[k + 1 :]
        ):
            continue
        kept.append(c)
        last[seg] = c.number
    return kept


def detect(texts: dict[str, list[str]], language: str = "fr") -> Structure:
    """The structure of a book given as {file name: text lines}, files in reading order."""
    files = list(texts)
    order = {f: k for k, f in enumerate(files)}
    tocs = {f: toc_ranges(texts[f]) for f in files}
    cands = [c for f in files for c in find_candidates(f, texts[f], tocs[f])]
    repeated = {f: _repeated_blocks(texts[f]) for f in files}

    def pos(c: Candidate) -> tuple[int, int]:
        return order[c.file], c.line

    nouns = Counter(c.style for c in cands if c.kind == "part")
    part_noun = max((n for n in nouns if nouns[n] >= 2), key=lambda n: nouns[n], default=None)
    wrappers = [c for c in cands if c.kind == "part" and c.style != part_noun]
    part_cands = [c for c in cands if c.kind == "part" and c.style == part_noun]
    chapters = _choose_chapters(cands, part_cands)
    part_cands = [p for p in part_cands if any(pos(c) > pos(p) for c in chapters)]  # parts hold chapters
    toc: list[TocEntry] = []
    for f in files:  # part indices run on across files
        offset = sum(1 for e in toc if e.kind == "part")
        toc += [
            replace(e, part=e.part + offset if e.part >= 0 or offset else e.part, file=f)
            for a, b in tocs[f]
            for e in parse_toc(texts[f], a, b, part_noun)
        ]
    title = None
    if wrappers and wrappers[0].subtitle:
        title = clean_title(wrappers[0].subtitle)
    warnings: list[str] = []
    first_body = min([pos(c) for c in chapters + part_cands], default=None)
    if first_body is None:
        return Structure(title, [], [], toc, warnings, [])

    # front matter: named headings (and upper-case headings the contents list) before the body
    f0, l0 = first_body
    named = [c for c in cands if c.kind == "named"]
    front_cands = [c for c in named if pos(c) < first_body]
    toc_other = {normalize(e.title) for e in toc if e.kind == "other"}
    for f in files[: f0 + 1]:
        stop = l0 if order[f] == f0 else len(texts[f])
        for c in upper_headings(f, texts[f], 0, stop):
            if normalize(c.title) in toc_other and all(pos(c) != pos(d) for d in front_cands):
                front_cands.append(c)
    front_cands.sort(key=pos)
    ends = [c for c in cands if c.kind in ("end", "back")]
    tocs_starts = [(f, a) for f in files for a, _b in tocs[f]]

    def stop_after(c: Candidate, nxt: tuple[int, int] | None) -> tuple[str, int, bool]:
        """Where the unit starting at c ends: an end marker or back matter before `nxt`,
        else `nxt` (same file), else the end of c's file (or its table of contents)."""
        limit = nxt if nxt is not None and nxt[0] == order[c.file] else (order[c.file], len(texts[c.file]))
        for e in ends:
            if pos(c) < pos(e) < limit:
                return c.file, e.line, e.kind == "end"
        for f, a in tocs_starts:
            if (order[c.file], c.line) < (order[f], a) < limit:
                return c.file, a, False
        return c.file, limit[1], False

    front: list[Section] = []
    body_marks = sorted([pos(c) for c in front_cands] + [first_body])
    for c in front_cands:
        nxt = next(m for m in body_marks if m > pos(c))
        f, end, _ = stop_after(c, nxt)
        lines = texts[f]
        end = trim_half_title(lines, c.line, end, repeated[f])
        name = clean_title(c.title)
        front.append(_section(NAMES.get(c.style, "front-matter"), name, name, None, c, lines, end))
        title = title or _half_title(lines, end, nxt, order[f], repeated[f])
    if title is None:
        f = files[first_body[0]]
        a = max([x.end for x in front if x.file == f], default=0)
        title = _half_title(texts[f], a, first_body, order[f], repeated[f], scan=True)

    parts: list[Part] = []
    left_out: list[tuple[str, int, int, int]] = []
    if part_cands:
        for k, p in enumerate(part_cands):
            next_part = pos(part_cands[k + 1]) if k + 1 < len(part_cands) else None
            members = sorted(
                (
                    c
                    for c in chapters + named
                    if pos(p) < pos(c) and (next_part is None or pos(c) < next_part) and c.file == p.file
                ),
                key=pos,
            )
            last = max([pos(c) for c in members], default=pos(p))
            f, end, marker = stop_after(Candidate(p.file, last[1], "x"), next_part)
            lines = texts[f]
            if not marker:
                end = trim_half_title(lines, last[1], end, repeated[f])
            members = [c for c in members if c.line < end]
            part = Part(
                label=clean_title(p.title),
                title=clean_title(p.title),
                subtitle=clean_title(p.subtitle) if p.subtitle else None,
                number=p.number,
                file=p.file,
                line=p.line,
                end=end,
                start=p.title,
                heading_blocks=p.heading_blocks,
                end_marker=marker,
            )
            first = min([c.line for c in members], default=end)
            body = skip_blocks(lines, p.line, p.heading_blocks)
            if _prose_words(lines, body, first) >= 50:
                part.sections.append(
                    _section("introduction", "Introduction", "Introduction", None, p, lines, first)
                )
            part.sections += _sections(members, lines, end, language)
            parts.append(part)
            if next_part is None and end < len(lines):
                left_out.append((f, end, len(lines), _words_outside(lines, end, tocs[f])))
        for c in chapters + named:
            if pos(c) > pos(part_cands[0]) and not any(
                s.file == c.file and s.line == c.line for p in parts for s in p.sections
            ):
                if (
                    all(not (p.file == c.file and p.line < c.line < p.end) for p in parts)
                    and c.kind == "chapter"
                ):
                    warnings.append(
                        f"{c.file} line {c.line + 1}: chapter heading {c.title!r} lies outside every part; left out"
                    )
    else:
        members = sorted((c for c in chapters + named if pos(c) >= first_body), key=pos)
        for f in files:
            cs = [c for c in members if c.file == f]
            if not cs:
                continue
            _f, end, _marker = stop_after(cs[-1], None)
            front += _sections(cs, texts[f], end, language)
            if end < len(texts[f]):
                left_out.append((f, end, len(texts[f]), _words_outside(texts[f], end, tocs[f])))
    return Structure(title, front, parts, toc, warnings, left_out)


def _words_outside(lines: list[str], start: int, tocs: list[tuple[int, int]]) -> int:
    """Words from `start` to the end, tables of contents not counted."""
    return count_words(
        [x for i, x in enumerate(lines[start:], start) if not any(a <= i < b for a, b in tocs)]
    )


def _half_title(
    lines: list[str],
    a: int,
    nxt: tuple[int, int] | None,
    file_order: int,
    repeated: set[str],
    scan: bool = False,
) -> str | None:
    """The upper-case repeated block(s) just before the body: the book's own title."""
    if nxt is None or nxt[0] != file_order:
        return None
    blocks = text_blocks(lines, a, nxt[1])
    texts: list[str] = []
    for b0, b1 in reversed(blocks):
        text = " ".join(x.strip() for x in lines[b0:b1])
        if is_upper(text) and normalize(text) in repeated:
            texts.insert(0, text)
        elif texts or not scan:
            break
    return clean_title(" ".join(texts)) if texts else None


def _section(
    kind: str, label: str, title: str, number: int | None, c: Candidate, lines: list[str], end: int
) -> Section:
    body = skip_blocks(lines, c.line, c.heading_blocks)
    return Section(
        kind,
        label,
        title,
        number,
        c.file,
        c.line,
        body,
        end,
        lines[c.line].strip(),
        c.heading_blocks,
        count_words(lines[body:end]),
    )


def _sections(members: list[Candidate], lines: list[str], end: int, language: str) -> list[Section]:
    out = []
    word = "Chapitre" if language == "fr" else "Chapter"
    for k, c in enumerate(members):
        e = members[k + 1].line if k + 1 < len(members) else end
        if c.kind == "chapter":
            label = f"{word} {int_to_roman(c.number or 0)}"
            out.append(_section("chapter", label, clean_title(c.title) or label, c.number, c, lines, e))
        else:
            name = clean_title(c.title)
            out.append(_section(NAMES.get(c.style, "front-matter"), name, name, None, c, lines, e))
    return out


# --- checks -------------------------------------------------------------------------------


def sections_in_order(s: Structure) -> list[tuple[int, Section]]:
    """(part index or -1, section) for every section, in reading order."""
    return [(-1, x) for x in s.front_matter] + [(k, x) for k, p in enumerate(s.parts) for x in p.sections]


def check_structure(s: Structure, min_words: int = 50, max_words: int = 20_000) -> list[str]:
    """Warnings: section sizes, numbering gaps, and where the contents and the body disagree."""
    out = list(s.warnings)
    for k, top in sections_in_order(s):
        for sec in leaf_sections(top):
            where = (
                (f"{sec.title!r} in " if sec is not top else "")
                + f"{top.label}"
                + (f" of {s.parts[k].title}" if k >= 0 else "")
            )
            if sec.words < min_words:
                out.append(
                    f"{where}: only {sec.words} words (under {min_words}): a heading inside the text, or a short piece?"
                )
            elif sec.words > max_words:
                out.append(f"{where}: {sec.words:,} words (over {max_words:,}): a missed heading?")
    groups: dict[int, list[Section]] = {}
    for k, sec in sections_in_order(s):
        if sec.kind == "chapter":
            groups.setdefault(k, []).append(sec)
    for k, secs in groups.items():
        prev = 0
        for sec in secs:
            if sec.number is not None and sec.number != prev + 1:
                missing = ", ".join(int_to_roman(n) for n in range(prev + 1, sec.number))
                after = f"after {int_to_roman(prev)}" if prev else "at the start"
                out.append(
                    f"numbering gap{' in ' + s.parts[k].title if k >= 0 else ''}: {int_to_roman(sec.number)} "
                    f"comes {after} ({missing} missing)"
                )
            prev = sec.number or prev
    out += compare_toc(s)
    return out


def match_toc(s: Structure) -> tuple[list[tuple[Section, TocEntry]], list[TocEntry], list[Section]]:
    """Contents entries matched to sections: chapters by (part, number), others by title.
    Returns the pairs, the entries with no section, the sections with no entry."""
    toc_parts = [e for e in s.toc if e.kind == "part"]
    in_parts = bool([p for p in s.parts if not p.appended] and toc_parts)
    body: dict[tuple, Section] = {}
    for k, sec in sections_in_order(s):
        key_part = k if in_parts else -1
        key = (
            ("chapter", key_part, sec.number)
            if sec.kind == "chapter"
            else ("title", key_part, heading_key(sec.title))
        )
        body[key] = sec
    pairs, missing, seen = [], [], set()
    for e in s.toc:
        if e.kind == "part":
            continue
        key_part = e.part if in_parts else -1
        key = (
            ("chapter", key_part, e.number)
            if e.kind == "chapter"
            else ("title", key_part, heading_key(e.title))
        )
        if key not in body and e.kind != "chapter":  # a named section filed under another part
            key = next((kk for kk in body if kk[0] == "title" and kk[2] == key[2] and kk not in seen), key)
        if key not in body or key in seen:
            missing.append(e)
            continue
        seen.add(key)
        pairs.append((body[key], e))
    return pairs, missing, [sec for key, sec in body.items() if key not in seen]


def apply_toc_titles(s: Structure) -> None:
    """Take a contents title where it is the body's title with better case, or the body's
    title completed ("PÉTITION" in the body, "Pétition des fabricants de chandelles" listed)."""
    for sec, e in match_toc(s)[0]:
        body, listed = normalize(sec.title), normalize(e.title)
        if body == listed or (listed.startswith(body + " ") and sec.kind == "chapter"):
            if sec.label == sec.title:
                sec.label = e.title
            sec.title = e.title


def compare_toc(s: Structure) -> list[str]:
    """Where the contents and the body disagree."""
    if not s.toc:
        return []
    out = []
    toc_parts = [e for e in s.toc if e.kind == "part"]
    body_parts = [p for p in s.parts if not p.appended]
    if body_parts and toc_parts and len(toc_parts) != len(body_parts):
        out.append(f"the contents list {len(toc_parts)} parts, the body has {len(body_parts)}")
    pairs, missing, extra = match_toc(s)
    for sec, e in pairs:
        if e.kind == "chapter" and not _similar(sec.title, e.title):
            out.append(f"{sec.label}: the body says {sec.title!r}, the contents {e.title!r}")
    if missing:
        out.append(
            "in the contents, not in the tree: "
            + ", ".join(
                f"{e.text!r} ({e.file} line {s.offsets.get(e.file, 0) + e.line + 1})"
                if e.line >= 0
                else repr(e.text)
                for e in missing
            )
        )
    if extra:
        out.append(
            "in the tree, not in the contents: "
            + _listing([sec.label + (f" ({sec.title})" if sec.title != sec.label else "") for sec in extra])
        )
    return out


def _similar(a: str, b: str) -> bool:
    x, y = normalize(a), normalize(b)
    return (
        x == y
        or x.startswith(y)
        or y.startswith(x)
        or len(set(x.split()) & set(y.split())) * 2 >= len(set(x.split()) | set(y.split()))
    )


def _listing(items: list[str], n: int = 6) -> str:
    shown = ", ".join(repr(x) for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


# --- sub-sections -------------------------------------------------------------------------


def chapter_subentries(s: Structure) -> list[tuple[Section, list[TocEntry]]]:
    """Each chapter the contents list with entries indented under it (before the next entry at
    its indentation or less): the sub-sections the contents give it."""
    out = []
    index = {id(e): k for k, e in enumerate(s.toc)}
    for sec, e in match_toc(s)[0]:
        if sec.kind != "chapter":
            continue
        subs = []
        for f in s.toc[index[id(e)] + 1 :]:
            if f.indent <= e.indent or f.kind in ("part", "chapter"):
                break
            subs.append(f)
        if subs:
            out.append((sec, subs))
    return out


def _heading_blocks_in(lines: list[str], a: int, b: int) -> list[tuple[int, int, str]]:
    """Upper-case blocks of at most four unindented lines between a and b, with prose after
    them: the headings a chapter's sub-sections may have."""
    out = []
    for x, y in text_blocks(lines, a, b):
        text = " ".join(t.strip() for t in lines[x:y])
        if (
            y - x <= 4
            and is_upper(text)
            and not lines[x].startswith("    ")
            and not text.startswith("[")
            and len(text.split()) >= 2
        ):
            out.append((x, y, text))
    return out


#: Words a contents entry and its heading may word differently ("dans la" / "de la").
FUNCTION_WORDS = frozenset(
    "le la les l de du des d dans en a au aux et sur par pour un une chez ou "
    "the of in on and an to at for by".split()
)
#: Abbreviations a contents entry may use for a heading's word ("CHAP." for "Chapitre").
ABBREVIATIONS = {
    "chap": "chapitre",
    "ch": "chapitre",
    "art": "article",
    "liv": "livre",
    "sect": "section",
    "st": "saint",
    "ste": "sainte",
    "etc": "",
}
#: Below certainty, the least rapidfuzz similarity (0-100) at which an entry is taken for a
#: heading, with a warning naming both lines.
FUZZY_CUTOFF = 85


def heading_key(text: str) -> str:
    """A title's content words: normalize() (case, accents, punctuation, markers), abbreviations
    expanded, articles and prepositions dropped."""
    words = [ABBREVIATIONS.get(w, w) for w in normalize(text).split()]
    return " ".join(w for w in words if w and w not in FUNCTION_WORDS)


def heading_likeness(body: str, listed: str) -> int:
    """How surely a heading in the body is a contents entry: 100 when they differ only in case,
    accents, punctuation, a trailing period, articles, prepositions or abbreviations (or one
    extends the other, or they share three quarters of their words); else rapidfuzz's similarity
    of their content words (0-100), which FUZZY_CUTOFF turns into a match to be checked."""
    x, y = normalize(body), normalize(listed)
    if not x or not y:
        return 0
    if x == y or x.startswith(y + " ") or y.startswith(x + " "):
        return 100
    kx, ky = heading_key(body), heading_key(listed)
    if kx and ky and (kx == ky or kx.startswith(ky + " ") or ky.startswith(kx + " ")):
        return 100
    a, b = set(x.split()), set(y.split())
    if len(a & b) * 4 >= 3 * len(a | b):
        return 100
    return int(max(fuzz.ratio(kx, ky), fuzz.token_sort_ratio(kx, ky)))


@dataclass(frozen=True)
class Problem:
    """A disagreement between the contents and the body: (file, line index) where to look, the
    message, and the contents entry it is about (None for a heading the contents lack)."""

    file: str
    line: int
    message: str
    entry: TocEntry | None = None


def align(titles: list[str], blocks: list[str]) -> dict[int, tuple[int, int]]:
    """Contents titles matched to heading blocks in the same order, like a careful reader: first
    every title to the next block it surely names (heading_likeness 100), then each title left
    to the most alike block (at least FUZZY_CUTOFF) between its neighbours' matches.
    Returns {title index: (block index, likeness)}."""
    hits: dict[int, tuple[int, int]] = {}
    k = 0
    for i, t in enumerate(titles):
        j = next((j for j in range(k, len(blocks)) if heading_likeness(blocks[j], t) == 100), None)
        if j is not None:
            hits[i], k = (j, 100), j + 1
    for i, t in enumerate(titles):
        if i in hits:
            continue
        lo = max((j + 1 for n, (j, _s) in hits.items() if n < i), default=0)
        hi = min((j for n, (j, _s) in hits.items() if n > i), default=len(blocks))
        scored = [(heading_likeness(blocks[j], t), j) for j in range(lo, hi)]
        best = max(scored, default=(0, -1))
        if best[0] >= FUZZY_CUTOFF:
            hits[i] = (best[1], best[0])
    return hits


def find_subsections(
    s: Structure, texts: dict[str, list[str]], offsets: dict[str, int] | None = None
) -> list[Problem]:
    """Give each chapter the sub-sections its contents list and its body confirms: an upper-case
    heading block inside the chapter, in the contents' order, whose words are the entry's
    (align: wording variants match; a match below certainty is taken with a warning naming the
    contents line and the body line). Text between the chapter's heading and its first
    sub-section becomes a leading sub-section titled "<chapter title> (début)". Returns the
    disagreements: an entry with no heading in the body (its line in the contents), a match
    below certainty, and an upper-case heading inside a chapter with sub-sections that the
    contents do not list (its line in the body). `offsets` turn line indices into the raw
    file's line numbers in messages."""
    problems: list[Problem] = []
    for sec, entries in chapter_subentries(s):
        lines = texts[sec.file]
        off = (offsets or {}).get(sec.file, 0)
        blocks = _heading_blocks_in(lines, sec.body, sec.end)
        hits = align([e.title for e in entries], [b[2] for b in blocks])
        found: list[tuple[TocEntry, tuple[int, int, str]]] = []
        for i, e in enumerate(entries):
            if i not in hits:
                problems.append(
                    Problem(
                        sec.file,
                        e.line,
                        f"the contents list {e.title!r} under {sec.label}, but no heading "
                        f"inside {sec.label} matches it; left in the text around it",
                        e,
                    )
                )
                continue
            j, score = hits[i]
            found.append((e, blocks[j]))
            if score < 100:
                problems.append(
                    Problem(
                        sec.file,
                        e.line,
                        f"the contents' {e.title!r} is taken for the heading {blocks[j][2][:60]!r} at line "
                        f"{off + blocks[j][0] + 1} inside {sec.label} ({score} % alike, below certainty): check it",
                        None,
                    )
                )
        used = {b[0] for _e, b in found}
        for x, _y, text in blocks:
            if x not in used and found and x > found[0][1][0]:
                problems.append(
                    Problem(
                        sec.file,
                        x,
                        f"upper-case heading {text[:60]!r} inside {sec.label} is not in the contents;"
                        f" left in the text of the sub-section before it",
                    )
                )
        if not found:
            continue
        subs = []
        first = found[0][1][0]
        if count_words(lines[sec.body : first]):
            subs.append(
                Section(
                    "section",
                    f"{sec.title} (début)",
                    f"{sec.title} (début)",
                    None,
                    sec.file,
                    sec.line,
                    sec.body,
                    first,
                    sec.start,
                    sec.heading_blocks,
                    count_words(lines[sec.body : first]),
                )
            )
        for i, (e, (x, y, _text)) in enumerate(found):
            end = found[i + 1][1][0] if i + 1 < len(found) else sec.end
            subs.append(
                Section(
                    "section",
                    e.title,
                    e.title,
                    None,
                    sec.file,
                    x,
                    y,
                    end,
                    lines[x].strip(),
                    1,
                    count_words(lines[y:end]),
                )
            )
        sec.sections = subs
    return problems


# --- long sections -------------------------------------------------------------------------

#: The longest section a proposed tree holds: longer ones are split (split_long_sections).
MAX_WORDS = 20_000
#: The author's own break inside a chapter: a row of asterisks ("*       *       *").
DIVIDER_RE = re.compile(r"^(?:\*\s*){3,}$|^⁂$")
#: A numbered article: "ART. 12.", "ARTICLE PREMIER.", "Art. 3.—…".
ARTICLE_RE = re.compile(
    r"^(?P<label>(?:ART\.|ARTICLE|Art\.|Article)\s+(?:\d+|[IVXLC]+|PREMIER|premier|1er|Ier))\b.{0,80}$"
)


def _break_points(lines: list[str], sec: Section) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """Where a long section may be cut, kind by kind in the order tried: its own upper-case
    headings; the author's own summaries (loader.author_summary); the author's breaks (a row of
    asterisks: the cut is at the paragraph after it, the row stays in the text); numbered
    articles. Each point is (first line, heading blocks to skip, title or "")."""
    from loader.author_summary import is_summary_block

    blocks = [(a, b) for a, b in text_blocks(lines, sec.body, sec.end) if a > sec.body]
    heads = [
        (x, 1, clean_title(t)) for x, _y, t in _heading_blocks_in(lines, sec.body, sec.end) if x > sec.body
    ]
    summaries = [
        (a, 0, clean_title(re.split(r"\s*--\s*", " ".join(x.strip() for x in lines[a:b]))[0])[:80])
        for a, b in blocks
        if is_summary_block(lines[a:b])
    ]
    dividers = [
        (blocks[k + 1][0], 0, "")
        for k, (a, b) in enumerate(blocks[:-1])
        if b - a == 1 and DIVIDER_RE.match(lines[a].strip())
    ]
    articles = [
        (a, 0, clean_title(m.group("label"))) for a, _b in blocks if (m := ARTICLE_RE.match(lines[a].strip()))
    ]
    paragraphs, depth = [], 0  # the last resort: paragraphs of prose (not inside a footnote)
    for a, b in blocks:
        if depth == 0 and not lines[a].startswith((" ", "\t", "[")):
            paragraphs.append((a, 0, ""))
        depth = max(0, depth + sum(x.count("[") - x.count("]") for x in lines[a:b]))
    kinds = [
        ("its own headings", heads),
        ("the author's summaries", summaries),
        ("the author's breaks (rows of asterisks)", dividers),
        ("numbered articles", articles),
        ("paragraphs (no heading, summary, break or article inside it)", paragraphs),
    ]
    first: dict[str, int] = {}  # `prepare` finds a start line by its text: its first occurrence
    for i in range(sec.line, sec.end):
        first.setdefault(lines[i].strip(), i)
    kinds = [(kind, [p for p in points if first[lines[p[0]].strip()] == p[0]]) for kind, points in kinds]
    return [(kind, points) for kind, points in kinds if points]


def _balanced_cuts(lines: list[str], sec: Section, points: list[int], max_words: int) -> list[int] | None:
    """The fewest of `points` (line indices) cutting sec into pieces of at most max_words each,
    each cut the point nearest an equal share; None when even every point leaves one too long."""
    at = [count_words(lines[sec.body : x]) for x in points]
    for n in range(max(2, -(-sec.words // max_words)), len(points) + 2):
        chosen = sorted(
            {min(range(len(points)), key=lambda j: abs(at[j] - sec.words * k / n)) for k in range(1, n)}
        )
        cuts = [sec.body] + [points[j] for j in chosen] + [sec.end]
        if max(count_words(lines[a:b]) for a, b in zip(cuts, cuts[1:])) <= max_words:
            return chosen
    return None


def split_long_sections(
    s: Structure, texts: dict[str, list[str]], max_words: int = MAX_WORDS
) -> list[Problem]:
    """Give every section holding text over max_words words sub-sections: at its own headings
    (all of them), else at the fewest of the author's summaries, breaks or numbered articles
    that leave no piece over max_words (see _break_points). The first piece starts at the
    section's heading. Returns one warning per section split, naming its line, the rule and the
    cuts; a section with no such place keeps check_structure's "a missed heading?" warning."""
    problems: list[Problem] = []
    for _k, top in sections_in_order(s):
        for sec in leaf_sections(top):
            if sec.words <= max_words or sec.kind == "note":
                continue
            lines = texts[sec.file]
            picked: list[tuple[int, int, str]] = []
            for kind, points in _break_points(lines, sec):
                if kind == "its own headings":  # all of them, when that is enough
                    cuts = [sec.body] + [x for x, _b, _t in points] + [sec.end]
                    if max(count_words(lines[a:b]) for a, b in zip(cuts, cuts[1:])) <= max_words:
                        picked = points
                        break
                    continue
                chosen = _balanced_cuts(lines, sec, [x for x, _b, _t in points], max_words)
                if chosen:
                    picked = [points[j] for j in chosen]
                    break
            if not picked:
                continue
            n = len(picked) + 1
            cuts = [x for x, _b, _t in picked] + [sec.end]
            first_title = f"{sec.title} (début)" if all(t for _x, _b, t in picked) else f"{sec.title} (1/{n})"
            subs = [
                Section(
                    "section",
                    first_title,
                    first_title,
                    None,
                    sec.file,
                    sec.line,
                    sec.body,
                    cuts[0],
                    sec.start,
                    sec.heading_blocks,
                    count_words(lines[sec.body : cuts[0]]),
                )
            ]
            for k, (x, blocks, title) in enumerate(picked):
                body = skip_blocks(lines, x, blocks) if blocks else x
                title = title or f"{sec.title} ({k + 2}/{n})"
                subs.append(
                    Section(
                        "section",
                        title,
                        title,
                        None,
                        sec.file,
                        x,
                        body,
                        cuts[k + 1],
                        lines[x].strip(),
                        blocks,
                        count_words(lines[body : cuts[k + 1]]),
                    )
                )
            sec.sections = subs
            off = s.offsets.get(sec.file, 0)
            problems.append(
                Problem(
                    sec.file,
                    sec.line,
                    f"{sec.label if sec.title == sec.label else sec.label + ' (' + sec.title + ')'}: "
                    f"{sec.words:,} words (over {max_words:,}), split at {kind} into {n} sections "
                    f"(lines {', '.join(str(off + x + 1) for x, _b, _t in picked)}); check the cuts",
                )
            )
    return problems


# --- appended documents -------------------------------------------------------------------

#: The title of the part that holds a volume's appended documents when the body names none.
APPENDED_TITLE = {"fr": "Annexes", "en": "Appendices"}


def find_appended(
    s: Structure,
    texts: dict[str, list[str]],
    entries: list[TocEntry],
    language: str,
    notes: dict[str, int],
) -> tuple[list[Part], list[Problem], list[TocEntry]]:
    """Documents appended to a volume (pièces justificatives, an appendix, texts of laws and
    constitutions, another work bound after this one): contents entries the tree does not hold
    whose heading stands, upper case, after the tree's last section in the entry's file. Each
    becomes a section (kind "appendix") of one part per file, marked `appended`, titled by the
    first short upper-case block between the tree and the first document (a half-title,
    "PAMPHLETS"), else "Annexes". A document runs to the next one, a `FIN …` line, a table of
    contents or the end of the text. `notes` holds the heading line of each file's end notes
    (loader.endnotes): never a document's heading. Returns the parts, the warnings (a match
    below certainty names both lines) and the entries placed."""
    parts: list[Part] = []
    problems: list[Problem] = []
    placed: list[TocEntry] = []
    for f, lines in texts.items():
        mine = [e for e in entries if e.file == f and e.kind in ("other", "named")]
        start = max((sec.end for _k, sec in sections_in_order(s) if sec.file == f), default=None)
        if not mine or start is None:
            continue
        tocs = toc_ranges(lines)
        blocks = [
            (a, b, " ".join(x.strip() for x in lines[a:b]))
            for a, b in text_blocks(lines, start)
            if b - a <= 3 and not any(x <= a < y for x, y in tocs) and a != notes.get(f)
        ]
        blocks = [(a, b, t) for a, b, t in blocks if len(t) <= 150 and is_upper(t) and not END_RE.match(t)]
        hits = align([e.title for e in mine], [t for _a, _b, t in blocks])
        found = sorted((blocks[j][0], blocks[j][1], i, score) for i, (j, score) in hits.items())
        stops = sorted(
            [a for a, b in text_blocks(lines, start) if END_RE.match(" ".join(x.strip() for x in lines[a:b]))]
            + [a for a, _b in tocs if a >= start]
            + [len(lines)]
        )
        sections: list[Section] = []
        for k, (a, b, i, score) in enumerate(found):
            # a document ends where the next begins (`prepare` cuts there); the last at a stop
            end = found[k + 1][0] if k + 1 < len(found) else min(x for x in stops if x > a)
            e = mine[i]
            heading, n_blocks = " ".join(x.strip() for x in lines[a:b]), 1
            for c, d in text_blocks(lines, b, end)[:2]:  # "BACCALAURÉAT" then "ET SOCIALISME"
                longer = normalize(heading + " " + " ".join(x.strip() for x in lines[c:d]))
                if not (normalize(e.title) == longer or normalize(e.title).startswith(longer + " ")):
                    break
                heading, n_blocks, b = (
                    heading + " " + " ".join(x.strip() for x in lines[c:d]),
                    n_blocks + 1,
                    d,
                )
            words = count_words(lines[b:end])
            if not words:
                continue
            sections.append(
                Section("appendix", e.title, e.title, None, f, a, b, end, lines[a].strip(), n_blocks, words)
            )
            placed.append(e)
            if score < 100:
                problems.append(
                    Problem(
                        f,
                        e.line,
                        f"the contents' {e.title!r} is taken for the heading {lines[a].strip()[:60]!r} at line "
                        f"{s.offsets.get(f, 0) + a + 1}, a document appended to the volume "
                        f"({score} % alike, below certainty): check it",
                    )
                )
        if not sections:
            continue
        first = sections[0].line
        title_stop = min([first] + [x for x in [notes.get(f)] if x is not None and x >= start])
        title = APPENDED_TITLE.get(language, "Appendices")
        for a, b in text_blocks(lines, start, title_stop):
            text = " ".join(x.strip() for x in lines[a:b])
            if is_upper(text) and not END_RE.match(text) and len(text.split()) <= 6 and len(text) <= 60:
                title = clean_title(text)
                break
        parts.append(
            Part(
                title,
                title,
                None,
                None,
                f,
                first,
                sections[-1].end,
                sections[0].start,
                1,
                sections,
                appended=True,
            )
        )
    return parts, problems, placed


def leaf_sections(sec: Section) -> list[Section]:
    """The sections holding paragraphs under sec (itself when it has no sub-sections)."""
    return [sec] if not sec.sections else [x for c in sec.sections for x in leaf_sections(c)]
