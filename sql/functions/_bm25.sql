-- rag._bm25: the BM25 branch's candidates (pg_search), best first, for one or more wordings in one scan.
CREATE OR REPLACE FUNCTION rag._bm25(
    p_queries TEXT[],
    p_n       INT,
    p_book    TEXT DEFAULT NULL,
    p_levels  INT[] DEFAULT NULL,
    p_ids     INT[] DEFAULT NULL,
    p_parents TEXT[] DEFAULT NULL
) RETURNS TABLE (wording INT, c rag.candidate)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns, for each p_queries[wording], the p_n rows best matching it (pg_search BM25, French
stemming, any term: |||; never parsed) as rag.candidate: s the score, r 1..p_n (ties by id, the
cut included); filters p_book, p_levels, p_ids, p_parents (NULL for none). Rows by wording, then r.
Cost: one statement, one top-N scan per wording; planned at each call, the limit and filters
written in, so pg_search pushes both into its scan (decision 37).
*/
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT w.i::int, ROW(x.id, x.s, x.r, x.lvl, x.sf, x.pf)::rag.candidate '
        'FROM unnest($1) WITH ORDINALITY AS w(t, i) CROSS JOIN LATERAL ('
        'SELECT y.*, (row_number() OVER (ORDER BY y.s DESC, y.id))::int AS r FROM ('
        'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf '
        'FROM rag.hierarchical_content_nodes n WHERE n.content ||| w.t%s ORDER BY pdb.score(n.id) DESC, n.id LIMIT %s) y) x '
        'ORDER BY w.i, x.r',
        concat(CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $2' END,
               CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($3)' END,
               CASE WHEN p_ids IS NOT NULL THEN ' AND n.id = ANY($4)' END,
               CASE WHEN p_parents IS NOT NULL THEN ' AND n.parent_source_file = ANY($5)' END),
        p_n)
    USING p_queries, p_book, p_levels, p_ids, p_parents;
END
$$;
