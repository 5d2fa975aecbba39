-- rag.list_books: the books loaded, with their size.
CREATE OR REPLACE FUNCTION rag.list_books()
RETURNS TABLE (
    book             TEXT,
    title            TEXT,
    volume           TEXT,
    author           TEXT,
    year             INT,
    embedding_policy TEXT,
    nodes            INT,
    chunks           INT,
    tokens           BIGINT,
    embedded_chunks  INT,
    levels           INT[]
)
LANGUAGE sql STABLE
AS $$
/*
Returns one row per book in rag.books: metadata from its manifest (volume: which volume of the
work the book is, NULL for a whole work) and counts over its rows
(nodes = files, chunks = rows, tokens = sum of content_token_count, embedded_chunks = rows
with a vector, levels present). Cost: one pass over the table grouped by book.
*/
    SELECT b.book, b.title, b.volume, b.author, b.year, b.embedding_policy,
           count(DISTINCT n.source_file)::int, count(n.id)::int,
           coalesce(sum(n.content_token_count), 0)::bigint,
           count(n.embedding)::int,
           coalesce(array_agg(DISTINCT n.level ORDER BY n.level) FILTER (WHERE n.level IS NOT NULL), '{}')
    FROM rag.books b
    LEFT JOIN rag.hierarchical_content_nodes n ON n.book = b.book
    GROUP BY b.book, b.title, b.volume, b.author, b.year, b.embedding_policy
    ORDER BY b.book;
$$;
