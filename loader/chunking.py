"""Paragraph chunks: a chunk is a paragraph; a paragraph over the token threshold is split into
consecutive chunks at sentence boundaries (at word boundaries for a sentence that is itself
too long). Chunks concatenated with single spaces give the paragraph back."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from loader.tokens import count_tokens

# A sentence ends with . ! ? … (possibly followed by closing quotes/brackets) and a space.
_SENTENCE_END = re.compile(r"(?<=[.!?…])[»”)\]]*\s+")


@dataclass(frozen=True)
class Chunk:
    index: int
    text: str
    tokens: int
    paragraph: int = 1  # 1-based number of the paragraph it comes from (what anchors cite)


def paragraphs(body: str) -> list[str]:
    """Blank-line separated paragraphs of a Markdown body, inner whitespace kept as written."""
    return [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]


def split_sentences(text: str) -> list[str]:
    parts, last = [], 0
    for m in _SENTENCE_END.finditer(text):
        parts.append(text[last : m.start() + len(m.group(0).rstrip())].strip())
        last = m.end()
    parts.append(text[last:].strip())
    return [p for p in parts if p]


def _pack(units: list[str], fits: Callable[[str], bool]) -> list[str]:
    """Greedily join consecutive units with spaces while the result fits."""
    out: list[str] = []
    cur = ""
    for u in units:
        cand = f"{cur} {u}" if cur else u
        if fits(cand):
            cur = cand
        else:
            if cur:
                out.append(cur)
            cur = u
    if cur:
        out.append(cur)
    return out


def split_paragraph(text: str, fits: Callable[[str], bool]) -> list[str]:
    if fits(text):
        return [text]
    pieces: list[str] = []
    for sentence in split_sentences(text):
        if fits(sentence):
            pieces.append(sentence)
        else:  # one sentence over the limit: cut between words, never before a citation anchor
            words: list[str] = []
            for w in sentence.split(" "):
                if words and w.startswith("[§"):  # "[§12]." stays with the word it follows (docs/anchors.md)
                    words[-1] += " " + w
                else:
                    words.append(w)
            pieces.extend(_pack(words, fits))
    return _pack(pieces, fits)


def chunk_body(body: str, max_tokens: int, extra_fits: Callable[[str], bool] | None = None) -> list[Chunk]:
    """Chunks of a .md body. `extra_fits` adds the embedder's own limit (its input window)."""

    def fits(t: str) -> bool:
        return count_tokens(t) <= max_tokens and (extra_fits is None or extra_fits(t))

    chunks: list[Chunk] = []
    for number, para in enumerate(paragraphs(body), start=1):
        for piece in split_paragraph(para, fits):
            chunks.append(Chunk(len(chunks), piece, count_tokens(piece), number))
    return chunks
