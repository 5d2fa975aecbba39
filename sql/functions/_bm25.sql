-- rag._bm25: the BM25 branch's candidates (pg_search), best first.
CREATE OR REPLACE FUNCTION rag._bm25(
    p_query   TEXT,
    p_n       INT,
    p_book    TEXT DEFAULT NULL,
    p_levels  INT[] DEFAULT NULL,
    p_ids     INT[] DEFAULT NULL,
    p_parents TEXT[] DEFAULT NULL
) RETURNS SETOF rag.candidate
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
/*
Returns the p_n rows best matching p_query (pg_search BM25, French stemming, any term: |||;
never parsed) as rag.candidate: s the score, r 1..p_n (ties by id, the cut included); filters
p_book, p_levels, p_ids, p_parents (NULL for none). Cost: one top-N scan; without filters a
static statement (cached plan), with filters a dynamic one, so pg_search pushes them down.
*/
BEGIN
    IF num_nulls(p_book, p_levels, p_ids, p_parents) = 4 THEN
        RETURN QUERY
        SELECT x.id, x.s, (row_number() OVER (ORDER BY x.s DESC, x.id))::int, x.lvl, x.sf, x.pf FROM (
            SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf
            FROM rag.hierarchical_content_nodes n
            WHERE n.content ||| p_query
            ORDER BY pdb.score(n.id) DESC, n.id LIMIT p_n) x;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT x.id, x.s, (row_number() OVER (ORDER BY x.s DESC, x.id))::int, x.lvl, x.sf, x.pf FROM ('
        'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.source_file AS sf, n.parent_source_file AS pf '
        'FROM rag.hierarchical_content_nodes n WHERE n.content ||| $1%s ORDER BY pdb.score(n.id) DESC, n.id LIMIT %s) x',
        concat(CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $2' END,
               CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($3)' END,
               CASE WHEN p_ids IS NOT NULL THEN ' AND n.id = ANY($4)' END,
               CASE WHEN p_parents IS NOT NULL THEN ' AND n.parent_source_file = ANY($5)' END),
        p_n)
    USING p_query, p_book, p_levels, p_ids, p_parents;
END
$$;
