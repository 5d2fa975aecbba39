"""Result shapes of the MCP tools: pydantic models, so clients get structured content and a
published output schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# --- result shapes -------------------------------------------------------------------------


class Citation(BaseModel):
    book: str
    heading_path: str
    source_file: str
    chunk_index: int
    paragraph: int | None = Field(
        None,
        description="the paragraph of source_file this chunk is from (§N, 1-based); for a source.md row, the number chapter summaries' anchors cite: cite it as §N",
    )
    scholarly: str | None = Field(
        None,
        description="the passage cited as a scholar writes it (author, *title*, volume (year), part, chapter, « title », § N; a summary says résumé): quote this in answers",
    )
    url: str | None = Field(
        None,
        description="the paragraph in its chapter in the reading room (served by `bookrag mcp --http`), for a reader to check the citation",
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
    )
    kind: Literal["text", "author_summary", "extractive_summary"] | None = Field(
        None,
        description="'author_summary': the author's own summary of the section (his outline of what follows, in his words: quotable); 'extractive_summary': the author's sentences chosen and arranged by a program (quote the paragraphs it cites, never it); 'text': the book's text or a summary; absent where the tool does not say",
    )


class Hit(Chunk):
    rank: int
    score: float
    bm25_rank: int | None = None
    vector_rank: int | None = None
    section_score: float | None = None
    sentence_rank: int | None = Field(
        None,
        description="placed by the sentence branch: its rank there (a chapter-summary sentence close to the query cites this paragraph)",
    )
    found_by: list[int] | None = Field(
        None,
        description="with phrasings: the wordings that found this hit (0 = the query, i = phrasings[i-1])",
    )
    phrasing_ranks: list[int] | None = Field(
        None, description="with phrasings: its rank in each of those wordings' searches, in found_by's order"
    )
    parent: list[Chunk] | None = Field(None, description="the parent node's rows, when expand_parent")
    cited: list[Chunk] | None = Field(
        None,
        description="when expand_cited: a summary hit's rows its anchors cite, a paragraph hit's end notes",
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
        None, description="when token_budget is set: hits and parents within the budget, in reading order"
    )
    context_tokens: int | None = None


class Node(BaseModel):
    source_file: str
    book: str
    level: int
    node_type: str
    heading_path: str
    parent_source_file: str | None
    tokens: int = Field(description="the tokens of the chunks returned")
    last_paragraph: int | None = Field(
        None,
        description="get_node and get_parent: the node's last §N, whichever paragraphs were asked for (read on with get_node's paragraphs)",
    )
    chunks: list[Chunk]


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
