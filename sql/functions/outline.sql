-- rag.outline: a book's table of contents: one row per node, in document order.
CREATE OR REPLACE FUNCTION rag.outline(
    p_book TEXT
) RETURNS TABLE (
    source_file        TEXT,
    parent_source_file TEXT,
    level              INT,
    node_type          TEXT,
    heading_path       TEXT,
    node_order           INT,
    chunk_count        INT,
    tokens             INT,
    embedded           BOOLEAN,
    depth              INT,
    author_summaries   INT[]
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns every node (file) of p_book in document order (preorder of the summary tree: the book
summary, then each front-matter or part summary followed by what it covers), with its size in
chunks and tokens, whether it carries vectors, its depth in the tree (0 the book, 1 a part or
front matter, 2 a chapter, 3 a chapter's section…; a source.md one below its summary), read from
its folder, since levels stop at 3, and the paragraphs (§N) that are the author's own summaries
(kind 'author_summary'; NULL when none). Unknown book: error naming the known books.
Cost: one index scan over the book's rows, grouped by file.
*/
BEGIN
    PERFORM rag._check_search_args(NULL, 1, p_book, NULL, false);
    IF p_book IS NULL THEN
        RAISE EXCEPTION 'book is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT n.source_file, min(n.parent_source_file), min(n.level), min(n.node_type), min(n.heading_path),
           min(n.node_order), count(*)::int, sum(coalesce(n.content_token_count, 0))::int,
           bool_or(n.embedding IS NOT NULL),
           cardinality(string_to_array(n.source_file, '/')) - 3 + (min(n.node_type) = 'source')::int,
           array_agg(DISTINCT n.paragraph ORDER BY n.paragraph) FILTER (WHERE n.kind = 'author_summary')
    FROM rag.hierarchical_content_nodes n
    WHERE n.book = p_book
    GROUP BY n.source_file
    ORDER BY min(n.node_order), n.source_file;
END
$$;
