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
Returns the p_n rows whose content best matches p_query (pg_search BM25 over the French-stemmed
content, any term matching: |||; the query is tokenized, never parsed), as rag.candidate: s the
BM25 score, r 1..p_n (ties by id, the cut included). Filters, each NULL for none: p_book, p_levels, p_ids (the
rows of a `within` subtree: rag._subtree_ids), p_parents (rows whose parent is one of these
source_files). Arguments are the caller's, already checked.
Cost: one pg_search top-N scan. Without filters a static statement (plan cached for the
session); with filters a dynamic one, so that pg_search pushes each filter into its scan
(planned per call, about 0.5 ms).
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
