"""Quotes checked against the book (issue 45): an answer's quotes and their citations read from its
text, then checked in one call of rag.check_quotes (the verdicts and the "words, not bytes" rules
live there). The one parser of answers, for the MCP tool `check_quotes`, `bookrag verify`,
`bookrag ask` with an LLM and the reading room's /verify page.

An answer's quotes are the runs between « and », “ and ”, or two straight double quotes " (a
quotation inside another belongs to it); a run of fewer than MIN_WORDS words is a term, not a
quote, and is left out. Each quote's citation is the first one after it in the same paragraph
(lines up to a blank line), else the last one before it there; a citation is any form the tools
print:
  the scholarly string   Bastiat, *Sophismes économiques* (1848), 1re série, ch. VII, « … », § 4
                         (bookrag.cite.scholarly of a loaded node; asterisks optional)
  a file and its §N      corpus/…/source.md §4  (or `source.md, § 4`)
  a reading-room URL     http://127.0.0.1:8765/books/…/chapitre-07-…?hl=4#p4  (bookrag.links)
  a numbered passage     [3], when the caller says which passage each number is (bookrag ask)
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
from psycopg.rows import dict_row, tuple_row

from bookrag.cite import book_meta, scholarly
from bookrag.errors import BookragError
from bookrag.links import citation_url, node_of_url
from bookrag.search import resolve_node

VERDICTS = ("exact", "elsewhere", "close", "not found", "summary")
MIN_WORDS = 3  # fewer words between quotation marks: a term (« marché national »), not a quote
MAX_ANSWER_CHARS = 100_000
_PAIRS = {"«": "»", "“": "”", '"': '"'}
_CLOSERS = {"»": "«", "”": "“"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_URL = re.compile(r"(?:https?://[^\s/]+)?/books/[^\s)\]>»\"'<]+")
_PATH = re.compile(
    r"((?:corpus/)?[\w.-]+(?:/[\w.-]+)*\.md)(?:\s*,?\s*(?:§|¶|paragraph|paragraphe)\s*(\d+))?", re.I
)
_PARAGRAPH = re.compile(r"\s*,?\s*§+\s*(\d+)")
_NUMBERED = re.compile(r"\[(\d+)\]")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Claim:
    """One quote and the place it was cited at (None: not cited)."""

    quote: str
    source_file: str | None = None
    paragraph: int | None = None
    book: str | None = None
    cited_as: str | None = None  # the citation as the answer wrote it
    end: int | None = None  # in an answer's text: where the quote's closing mark is


@dataclass
class Checked:
    """rag.check_quotes's verdict on one quote, with the citation of where its words are."""

    quote: str
    verdict: str
    source_file: str | None = None
    paragraph: int | None = None
    paragraph_last: int | None = None
    scholarly: str | None = None
    url: str | None = None
    book_words: str | None = None
    differences: list[str] = field(default_factory=list)
    note: str | None = None
    cited_source_file: str | None = None
    cited_paragraph: int | None = None
    cited_as: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Cite:
    start: int
    end: int
    source_file: str | None
    paragraph: int | None
    text: str


def _where(text: str, i: int) -> str:
    line = text.count("\n", 0, i) + 1
    return f"line {line}, character {i - (text.rfind(chr(10), 0, i) + 1) + 1}"


def check_text(text: str, what: str = "the answer") -> None:
    """Refuse a text no quote can be read from: too long, or holding a control character."""
    if len(text) > MAX_ANSWER_CHARS:
        raise BookragError(f"{what} is {len(text):,} characters long; the limit is {MAX_ANSWER_CHARS:,}")
    bad = _CONTROL.search(text)
    if bad:
        raise BookragError(
            f"{what} holds a control character (U+{ord(bad.group()):04X}) at {_where(text, bad.start())}; remove it"
        )


#: scholarly_prefixes's last answer per database, kept while rag.books says no book was loaded since
_PREFIXES: dict[tuple[str, str], dict[str, str]] = {}


def scholarly_prefixes(conn: psycopg.Connection) -> dict[str, str]:
    """Each loaded node's scholarly citation without its paragraph (bookrag.cite, the one rule),
    to its source_file: what an answer's scholarly citations are read back by. Kept between calls
    until a load stamps rag.books again."""
    with conn.cursor(row_factory=dict_row) as cur:
        stamp = cur.execute(
            "SELECT count(*)::text || '/' || coalesce(max(loaded_at)::text, '') AS s FROM rag.books"
        ).fetchone()
        key = (f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}", stamp["s"] if stamp else "")
        if key in _PREFIXES:
            return _PREFIXES[key]
        rows = cur.execute(
            "SELECT source_file, book, heading_path, node_type FROM rag.hierarchical_content_nodes WHERE chunk_index = 0"
        ).fetchall()
    meta = book_meta(conn)
    found = {
        scholarly(meta.get(r["book"]), r["heading_path"], None, r["node_type"]): r["source_file"]
        for r in rows
    }
    _PREFIXES.clear()
    _PREFIXES[key] = found
    return found


_FOLD = {"’": "'", "ʼ": "'", "«": '"', "»": '"', "“": '"', "”": '"'}


def _fold(text: str) -> tuple[str, list[int]]:
    """The text as scholarly citations are matched in (no spacing, no asterisks, one apostrophe
    and one quotation mark), and the position in `text` of each character kept. Plain string
    search over this is fast; a regular expression of every citation's variants was not (0.3 s
    for an answer of 20 quotes)."""
    kept = [(i, _FOLD.get(ch, ch)) for i, ch in enumerate(text) if ch != "*" and not ch.isspace()]
    return "".join(ch for _, ch in kept), [i for i, _ in kept]


@functools.lru_cache(maxsize=4096)
def _folded(prefix: str) -> str:
    return _fold(prefix)[0]


def _citations(
    text: str, prefixes: Mapping[str, str], numbered: Mapping[int, tuple[str, int | None]]
) -> list[_Cite]:
    found: list[_Cite] = []
    taken = [False] * (len(text) + 1)

    def add(start: int, end: int, source_file: str | None, paragraph: int | None) -> None:
        if any(taken[start:end]):
            return
        for i in range(start, end):
            taken[i] = True
        found.append(_Cite(start, end, source_file, paragraph, text[start:end]))

    if prefixes:
        folded, where = _fold(text)
        for prefix in sorted(prefixes, key=len, reverse=True):  # the longest first: a summary's "…, résumé"
            needle = _folded(prefix)
            at = folded.find(needle)
            while at >= 0:
                start, end = where[at], where[at + len(needle) - 1] + 1
                par = _PARAGRAPH.match(text, end)
                add(start, par.end() if par else end, prefixes[prefix], int(par.group(1)) if par else None)
                at = folded.find(needle, at + len(needle))
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,;:")
        parts = urlsplit(url)
        numbers = re.findall(r"\d+", (parse_qs(parts.query).get("hl") or [""])[0]) or re.findall(
            r"^p(\d+)$", parts.fragment
        )
        add(m.start(), m.start() + len(url), node_of_url(url), int(numbers[0]) if numbers else None)
    for m in _PATH.finditer(text):
        add(m.start(), m.end(), m.group(1), int(m.group(2)) if m.group(2) else None)
    for m in _NUMBERED.finditer(text):
        n = int(m.group(1))
        if n in numbered:
            add(m.start(), m.end(), *numbered[n])
    return sorted(found, key=lambda c: c.start)


def _quotes(text: str, cites: list[_Cite]) -> list[tuple[int, int]]:
    """(start, end) of each quotation's inside, outside the citations' own text (a scholarly
    citation's « chapter title »)."""
    inside = [False] * (len(text) + 1)
    for c in cites:
        for i in range(c.start, c.end):
            inside[i] = True
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if inside[i]:
            i += 1
            continue
        if ch in _CLOSERS:
            raise BookragError(
                f"the answer closes a quotation with {ch} at {_where(text, i)} that it never opened; "
                f"open it with {_CLOSERS[ch]} or remove it"
            )
        if ch in _PAIRS:
            closer, depth, j = _PAIRS[ch], 0, i + 1
            while j < len(text):
                if not inside[j]:
                    if text[j] == closer and depth == 0:
                        break
                    if ch != '"' and text[j] == ch:
                        depth += 1
                    elif ch != '"' and text[j] == closer:
                        depth -= 1
                j += 1
            if j >= len(text):
                raise BookragError(
                    f"the answer opens a quotation with {ch} at {_where(text, i)} and never closes it; "
                    f"close it with {closer} or remove it"
                )
            out.append((i + 1, j))
            i = j + 1
            continue
        i += 1
    return out


def parse_answer(
    text: str,
    prefixes: Mapping[str, str] | None = None,
    numbered: Mapping[int, tuple[str, int | None]] | None = None,
) -> list[Claim]:
    """The quotes of an answer's text, each with the citation it was given (module docstring);
    `prefixes` from scholarly_prefixes, `numbered` the passages [n] stand for. Raises BookragError
    (one sentence naming the line) for a quotation opened and never closed, or closed unopened."""
    check_text(text)
    cites = _citations(text, prefixes or {}, numbered or {})
    blocks = [m.end() for m in re.finditer(r"\n\s*\n", text)]

    def block(i: int) -> int:
        return sum(1 for b in blocks if b <= i)

    claims = []
    for start, end in _quotes(text, cites):
        quote = text[start:end].strip()
        if len(_WORD.findall(quote)) < MIN_WORDS:
            continue
        here = block(start)
        after = [c for c in cites if c.start >= end and block(c.start) == here]
        before = [c for c in cites if c.end <= start and block(c.start) == here]
        cite = after[0] if after else (before[-1] if before else None)
        claims.append(
            Claim(quote, cite.source_file, cite.paragraph, None, cite.text, end)
            if cite
            else Claim(quote, end=end)
        )
    return claims


def check_claims(conn: psycopg.Connection, claims: list[Claim], reading_room_url: str) -> list[Checked]:
    """rag.check_quotes on the claims, in one statement; each cited node as the tools name it
    (a URL, a path without corpus/: bookrag.search.resolve_node), each result with the scholarly
    citation and reading-room URL of where its words are."""
    for i, c in enumerate(claims, start=1):
        if "\x00" in c.quote:
            raise BookragError(f"quote {i} holds a NUL character; remove it")
    named = sorted({c.source_file for c in claims if c.source_file})
    with conn.cursor(row_factory=tuple_row) as cur:  # the names that are loaded nodes already, in one look-up
        loaded = {
            r[0]
            for r in cur.execute(
                "SELECT DISTINCT source_file FROM rag.hierarchical_content_nodes WHERE source_file = ANY(%s)",
                (named,),
            ).fetchall()
        }
    resolved = {f: f if f in loaded else resolve_node(conn, f) or f for f in named}
    payload = [
        {
            "quote": c.quote,
            "source_file": resolved.get(c.source_file) if c.source_file else None,
            "paragraph": c.paragraph,
            "book": c.book,
        }
        for c in claims
    ]
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute("SELECT * FROM rag.check_quotes(%s::jsonb)", (json.dumps(payload),)).fetchall()
    meta = book_meta(conn)
    out = []
    for c, r in zip(claims, rows):
        where = [r["paragraph"], r["paragraph_last"]] if r["paragraph"] is not None else None
        out.append(
            Checked(
                quote=c.quote,
                verdict=r["verdict"],
                source_file=r["source_file"],
                paragraph=r["paragraph"],
                paragraph_last=r["paragraph_last"] if r["paragraph_last"] != r["paragraph"] else None,
                scholarly=scholarly(meta.get(r["book"]), r["heading_path"], r["paragraph"], r["node_type"])
                + (f"–{r['paragraph_last']}" if r["paragraph_last"] not in (None, r["paragraph"]) else "")
                if r["source_file"]
                else None,
                url=citation_url(reading_room_url, r["source_file"], where) if r["source_file"] else None,
                book_words=r["book_words"],
                differences=list(r["differences"] or []),
                note=r["note"],
                cited_source_file=r["cited_source_file"],
                cited_paragraph=r["cited_paragraph"],
                cited_as=c.cited_as,
            )
        )
    return out


def check_answer(
    conn: psycopg.Connection,
    text: str,
    reading_room_url: str,
    numbered: Mapping[int, tuple[str, int | None]] | None = None,
) -> list[Checked]:
    """Every quote of an answer's text checked (parse_answer, then check_claims)."""
    claims = parse_answer(text, scholarly_prefixes(conn), numbered)
    return check_claims(conn, claims, reading_room_url) if claims else []


def describe(c: Checked) -> str:
    """One line: the verdict, the quote's opening words, and where its words are."""
    words = c.quote if len(c.quote) <= 60 else c.quote[:59] + "…"
    line = f"{c.verdict:<9}  « {' '.join(words.split())} »"
    if c.verdict == "exact":
        return f"{line}  {c.scholarly}"
    if c.verdict in ("elsewhere", "summary", "close"):
        cited = (
            f"cited {c.cited_as or c.cited_source_file}"
            + (f" §{c.cited_paragraph}" if c.cited_paragraph and not c.cited_as else "")
            if c.cited_as or c.cited_source_file
            else "not cited"
        )
        where = {
            "elsewhere": "the words are at",
            "summary": "a summary's words, at",
            "close": "nearly the words at",
        }[c.verdict]
        line += f"  {cited}; {where}: {c.scholarly} ({c.source_file} §{c.paragraph})"
        if c.verdict == "close":
            line += f"; the book: « {c.book_words} »; differs: {'; '.join(c.differences)}"
        return line
    return f"{line}  {c.note or ''}".rstrip()


def problem(c: Checked, numbered: Mapping[int, tuple[str, int | None]] | None = None) -> str:
    """What is wrong with a quote that is not exact, in one line an LLM can mend it by; the place
    named as the passage number when one of `numbered` holds the words."""
    at = next(
        (f"[{n}]" for n, (sf, p) in (numbered or {}).items() if sf == c.source_file and p == c.paragraph),
        f"{c.scholarly} ({c.source_file} §{c.paragraph})",
    )
    quote = f"« {' '.join(c.quote.split())} »"
    if c.verdict == "elsewhere":
        return f"{quote}: the words are not in the passage cited but in {at}; cite that one"
    if c.verdict == "close":
        return f"{quote}: not the book's words; {at} says « {c.book_words} » ({'; '.join(c.differences)})"
    if c.verdict == "summary":
        return f"{quote}: the words of a summary, not the book's; quote the book's paragraph or drop the quotation marks"
    return f"{quote}: these words are not in the books; quote a passage's exact words or drop the quotation marks"


def mark(text: str, claims: list[Claim], results: list[Checked]) -> str:
    """The answer with a mark after each quote that is not exact: [quote check: verdict …]."""
    marks = []
    for c, r in zip(claims, results):
        if r.verdict != "exact" and c.end is not None:
            where = (
                f", at {r.scholarly}"
                if r.verdict in ("elsewhere", "close", "summary") and r.scholarly
                else ""
            )
            marks.append((c.end + 1, f" [quote check: {r.verdict}{where}]"))
    for at, label in sorted(marks, reverse=True):
        text = text[:at] + label + text[at:]
    return text
