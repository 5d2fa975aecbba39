-- rag.get_children: a node's children in document order, as many whole nodes as fit a token budget.
CREATE OR REPLACE FUNCTION rag.get_children(
    p_source_file TEXT,
    p_budget      INT DEFAULT 4000
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
"Load the children" of p_source_file: its child nodes in document order, each whole, while the
running total of their sizes stays within p_budget (0..1,000,000 tokens, default 4000); the
first that does not fit and every one after it are left out, so the result reads as one
contiguous stretch of the book. Rows (rag.context_row): an included child's rows in chunk order,
role 'child', with their paragraph (§N) and used_tokens the running total; a child left out,
one row, role 'omitted', no content, its size in content_token_count. A leaf or unknown file:
no rows. Cost: one index range scan on parent_source_file plus the children's rows.
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
