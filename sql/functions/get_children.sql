-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
AS $$
/*
"Load the children" of p_source_file: the nodes whose parent_source_file is p_source_file,
in document order (node_order, then path). Children are taken whole, in that order, while the
running total of their sizes (sum of content_token_count over a node's rows) stays within
p_budget; the first child that does not fit, and every child after it, is left out, so what
is returned always reads as a contiguous stretch of the book.
Result (rag.context_row, the shape of every budgeted read): for each included child, its rows
in chunk order with role 'child' and used_tokens the running total of the rows returned so far;
for each child left out, one row with role 'omitted', chunk_index, content, paragraph and
used_tokens NULL, and content_token_count the whole child's size, so the caller knows exactly
what was omitted and how big it is. hit_rank is NULL. Every row carries its book; its parent
is p_source_file. Included rows carry their paragraph number in their file (the §N anchors cite).
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
    SELECT u.source_file, u.chunk_index, u.level, u.node_type, u.heading_path, u.content, u.content_token_count,
           u.book, u.node_order, u.paragraph, u.role, NULL::int,
           CASE WHEN u.role = 'child' THEN (sum(coalesce(u.content_token_count, 0)) FILTER (WHERE u.role = 'child')
                OVER (ORDER BY u.pos, u.source_file, u.chunk_index))::int END
    FROM (
        SELECT m.pos, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, n.content,
               n.content_token_count, n.book, n.node_order, n.paragraph,
               'child'::text AS role
        FROM marked m JOIN rag.hierarchical_content_nodes n ON n.source_file = m.f
        WHERE m.fits
        UNION ALL
        SELECT m.pos, m.f, NULL::int, m.lvl, m.nt, m.hp, NULL::text, m.tokens, m.bk, m.pos, NULL::int, 'omitted'
        FROM marked m
        WHERE NOT m.fits
    ) u
    ORDER BY u.pos, u.source_file, u.chunk_index;
END
$$;
