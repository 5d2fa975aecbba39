"""Result shapes of the MCP tools: pydantic models, so clients get structured content and a
published output schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


def _none(value: Any) -> bool:
    """exclude_if of an optional field: left out of a result when it holds nothing (no `"cites":
    null` on every hit); its schema is unchanged (it was never required), so clients validate
    either way."""
    return value is None


# --- result shapes -------------------------------------------------------------------------


SCHOLARLY = (
    "the citation to copy as is into an answer: the passage as a scholar cites it (author, *title*, volume (year), "
    "part, chapter, « title », § N; a summary says résumé, a footnote 'note 2' or 'note 2 de l'éditeur')"
)
KIND = (
    "'text': the book's text or a summary; 'author_summary': the author's own summary of the section (his outline "
    "of what follows, in his words: quotable); 'note': a footnote ([^N]: …), the author's unless the text says "
    "otherwise; 'editor_note': a footnote the text marks \"(Note de l'éditeur.)\": the editor's words, never quote "
    "it as the author's; 'extractive_summary': the author's sentences chosen and arranged by a program (quote the "
    "paragraphs it cites, never it)"
)
Kind = Literal["text", "author_summary", "note", "editor_note", "extractive_summary"]


class Citation(BaseModel):
    book: str
    heading_path: str
    source_file: str
    chunk_index: int
    paragraph: int | None = Field(
        None,
        description="the paragraph of source_file this chunk is from (§N, 1-based); for a source.md row, the number chapter summaries' anchors cite: cite it as §N",
        exclude_if=_none,
    )
    part: str | None = Field(
        None,
        description="a long paragraph is split in several chunks sharing one §N: which one this is ('1/2', '2/2'); absent when the chunk is the whole paragraph",
        exclude_if=_none,
    )
    note: str | None = Field(
        None,
        description="a footnote's label ('2' for the paragraph '[^2]: …'): see kind for whose note it is",
        exclude_if=_none,
    )
    scholarly: str | None = Field(
        None,
        description=SCHOLARLY,
        exclude_if=_none,
    )
    url: str | None = Field(
        None,
        description="the paragraph in its chapter in the reading room (served by `bookrag mcp --http`), for a reader to check the citation",
        exclude_if=_none,
    )


class Cites(BaseModel):
    source_file: str = Field(
        description="the cited file: the section's source.md, a child summary, or the end note a paragraph calls"
    )
    paragraphs: list[int] | None = Field(
        None, description="its paragraphs (§N, 1-based) the anchors name; none = the whole node"
    )


class Chunk(BaseModel):
    citation: Citation
    level: int
    node_type: str
    content: str
    tokens: int
    cites: list[Cites] | None = Field(
        None,
        description="summaries: what this chunk's anchors cite (the book's own paragraphs); paragraphs: the author's end notes they call",
        exclude_if=_none,
    )
    kind: Kind | None = Field(None, description=KIND, exclude_if=_none)


class Hit(Chunk):
    rank: int
    score: float
    bm25_rank: int | None = Field(None, exclude_if=_none)
    vector_rank: int | None = Field(None, exclude_if=_none)
    section_score: float | None = Field(None, exclude_if=_none)
    sentence_rank: int | None = Field(
        None,
        description="placed by the sentence branch: its rank there (a chapter-summary sentence close to the query cites this paragraph)",
        exclude_if=_none,
    )
    found_by: list[int] | None = Field(
        None,
        description="with phrasings: the wordings that found this hit (0 = the query, i = phrasings[i-1])",
        exclude_if=_none,
    )
    phrasing_ranks: list[int] | None = Field(
        None,
        description="with phrasings: its rank in each of those wordings' searches, in found_by's order",
        exclude_if=_none,
    )
    parent: list[Chunk] | None = Field(
        None, description="the parent node's rows, when expand_parent", exclude_if=_none
    )
    cited: list[Chunk] | None = Field(
        None,
        description="when expand_cited: a summary hit's rows its anchors cite, a paragraph hit's end notes",
        exclude_if=_none,
    )


class ContextChunk(Chunk):
    role: Literal["hit", "parent"]
    hit_rank: int
    used_tokens: int


class SearchResult(BaseModel):
    query: str
    phrasings: list[str] = Field(
        default_factory=list, description="the other wordings searched with the query"
    )
    hits: list[Hit]
    context: list[ContextChunk] | None = Field(
        None,
        description="when token_budget is set: hits and parents within the budget, in reading order",
        exclude_if=_none,
    )
    context_tokens: int | None = Field(None, exclude_if=_none)


class ChunkCitation(BaseModel):
    """A node's chunk's own citation: the rest (book, heading_path, source_file) is the node's."""

    chunk_index: int
    paragraph: int | None = Field(
        None,
        description="the paragraph of the node this chunk is from (§N, 1-based): cite it as §N",
        exclude_if=_none,
    )
    part: str | None = Field(
        None,
        description="a long paragraph is split in several chunks sharing one §N: which one this is ('1/2', '2/2'); absent when the chunk is the whole paragraph",
        exclude_if=_none,
    )
    note: str | None = Field(
        None, description="a footnote's label ('2' for the paragraph '[^2]: …'): see kind", exclude_if=_none
    )
    scholarly: str | None = Field(None, description=SCHOLARLY, exclude_if=_none)


class NodeChunk(BaseModel):
    """One chunk of a node (get_node, get_parent, get_children): the node gives book, heading_path,
    source_file, level and its reading-room url once."""

    citation: ChunkCitation
    content: str
    tokens: int
    cites: list[Cites] | None = Field(
        None,
        description="summaries: what this chunk's anchors cite (the book's own paragraphs); paragraphs: the author's end notes they call",
        exclude_if=_none,
    )
    kind: Kind | None = Field(None, description=KIND, exclude_if=_none)


class Node(BaseModel):
    source_file: str
    book: str
    level: int
    node_type: str
    heading_path: str
    parent_source_file: str | None
    url: str | None = Field(
        None,
        description="the node's page in the reading room (served by `bookrag mcp --http`)",
        exclude_if=_none,
    )
    tokens: int = Field(description="the tokens of the chunks returned")
    last_paragraph: int | None = Field(
        None,
        description="get_node and get_parent: the node's last §N, whichever paragraphs were asked for (read on with get_node's paragraphs)",
        exclude_if=_none,
    )
    chunks: list[NodeChunk] = Field(
        description="in reading order; each with its paragraph (§N) and the citation to copy (scholarly)"
    )


class LeftOut(BaseModel):
    source_file: str
    heading_path: str | None
    tokens: int


class Children(BaseModel):
    parent_source_file: str
    token_budget: int
    used_tokens: int
    included: list[Node]
    left_out: list[LeftOut] = Field(
        description="children not loaded because the budget was spent, in document order"
    )


class OutlineEntry(BaseModel):
    source_file: str
    parent_source_file: str | None
    level: int
    node_type: str
    heading_path: str
    chunks: int
    tokens: int
    embedded: bool
    depth: int  # 0 the book, 1 a part or front matter, 2 a chapter, 3 a chapter's section…; a text one below its summary
    author_summaries: list[int] | None = Field(
        None, description="a text node's paragraphs (§N) that are the author's own summaries of what follows"
    )


class Outline(BaseModel):
    book: str
    entries: list[OutlineEntry]


class Book(BaseModel):
    book: str
    title: str
    volume: str | None = Field(
        None, description="which volume of the work the book is (e.g. II), when it is one"
    )
    author: str | None
    year: int | None
    embedding_policy: str
    nodes: int
    chunks: int
    tokens: int
    embedded_chunks: int
    levels: list[int]


class Books(BaseModel):
    books: list[Book]


class SqlResult(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = Field(description="true when more rows existed than max_rows")


class QuoteIn(BaseModel):
    quote: str = Field(
        description="the words quoted, as the answer writes them (ellipses … or [...] for words left out)"
    )
    source_file: str | None = Field(
        None, description="the file cited (a hit's source_file, or its reading-room url); omitted: not cited"
    )
    paragraph: int | None = Field(None, description="the paragraph cited (§N); omitted: not cited")


class QuoteCheck(BaseModel):
    quote: str
    verdict: Literal["exact", "elsewhere", "close", "not found", "summary"] = Field(
        description="exact: the words are in the cited paragraph; elsewhere: verbatim in the book but at the "
        "paragraph below, not the one cited (or none was): cite that one; close: nearly the book's words "
        "(book_words, differences): quote those; summary: the words of a summary written for this project, "
        "never the book: quote the paragraphs it cites; not found: not in the books"
    )
    source_file: str | None = Field(
        None, description="where the words are (for elsewhere: not the file cited)"
    )
    paragraph: int | None = Field(None, description="the paragraph holding the words (§N)")
    paragraph_last: int | None = Field(
        None, description="when the quote runs into the next paragraph: that paragraph (§N+1)"
    )
    scholarly: str | None = Field(None, description="the citation of where the words are: copy it as is")
    url: str | None = Field(None, description="that paragraph in the reading room")
    book_words: str | None = Field(None, description="close: the book's own words for the span quoted")
    differences: list[str] | None = Field(None, description="close: each word that differs from the book")
    note: str | None = Field(
        None, description="what else to know: a citation naming nothing, a quote across two paragraphs…"
    )
    cited_source_file: str | None = Field(None, description="the file the quote was cited at, as read")
    cited_paragraph: int | None = Field(None, description="the paragraph it was cited at")
    cited_as: str | None = Field(None, description="answer: the citation as the answer wrote it")


class QuoteChecks(BaseModel):
    results: list[QuoteCheck] = Field(description="one per quote, in order")
    exact: int = Field(description="how many are exact")
    all_exact: bool = Field(description="true when every quote is exact: the answer may be sent")
