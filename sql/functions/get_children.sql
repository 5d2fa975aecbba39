-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS TABLE (
    source_file         TEXT,
    chunk_index         INT,
    level               INT,
    node_type           TEXT,
    heading_path        TEXT,
    content             TEXT,
    content_token_count INT,
    node_tokens         INT,
    included            BOOLEAN,
    book                TEXT,
    parent_source_file  TEXT,
    paragraph           INT
)
LANGUAGE plpgsql STABLE
AS $$
/*
"Load the children" of p_source_file: the nodes whose parent_source_file is p_source_file,
in document order (node_order, then path). Children are taken whole, in that order, while the
running total of their sizes (sum of content_token_count over a node's rows) stays within
p_budget; the first child that does not fit, and every child after it, is left out, so what
is returned always reads as a contiguous stretch of the book.
Result: for each included child, its rows (included = true, chunk order); for each child
left out, one row with included = false, chunk_index and content NULL, its heading_path and
node_tokens,
so the caller knows exactly what was omitted and how big it is. Every row also carries its book
and its parent (p_source_file), so it can be cited as it is, and its paragraph number in its file
(the §N anchors cite; NULL on a left-out row).
Parameters:
  p_source_file  the parent node's file.
  p_budget       tokens, 0..1,000,000 (default 4000); 0 includes nothing and lists every child.
Edge cases: a leaf or unknown file returns no rows.
Cost: one index range scan on parent_source_file plus the children's rows.
*/
BEGIN
    IF p_budget IS NULL OR p_budget < 0 OR p_budget > 1000000 THEN
        RAISE EXCEPTION 'budget must be between 0 and 1000000 tokens, got %', coalesce(p_budget::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH kids AS (
        SELECT n.source_file AS f, min(n.node_order) AS pos, min(n.level) AS lvl, min(n.node_type) AS nt,
               min(n.heading_path) AS hp, min(n.book) AS bk, sum(coalesce(n.content_token_count, 0))::int AS tokens
        FROM rag.hierarchical_content_nodes n
        WHERE n.parent_source_file = p_source_file
        GROUP BY n.source_file
    ), cut AS (
        SELECT k.*, sum(k.tokens) OVER (ORDER BY k.pos, k.f) AS running
        FROM kids k
    ), marked AS (
        SELECT c.*, bool_and(c.running <= p_budget) OVER (ORDER BY c.pos, c.f) AS fits
        FROM cut c
    )
    SELECT u.source_file, u.chunk_index, u.level, u.node_type, u.heading_path, u.content,
           u.content_token_count, u.node_tokens, u.included, u.book, p_source_file, u.paragraph
    FROM (
        SELECT m.pos, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
               n.content_token_count, m.tokens AS node_tokens, true AS included, n.book, n.paragraph
        FROM marked m JOIN rag.hierarchical_content_nodes n ON n.source_file = m.f
        WHERE m.fits
        UNION ALL
        SELECT m.pos, m.f, NULL::int, m.lvl, m.nt, m.hp, NULL::text, NULL::int, m.tokens, false, m.bk, NULL::int
        FROM marked m
        WHERE NOT m.fits
    ) u
    ORDER BY u.pos, u.source_file, u.chunk_index;
END
$$;
