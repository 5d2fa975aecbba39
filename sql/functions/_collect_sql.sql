-- SQL text of one hybrid branch collected into arrays: what rag.search_hybrid executes per branch.
CREATE OR REPLACE FUNCTION rag._collect_sql(
    p_branch_sql TEXT
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns the statement rag.search_hybrid EXECUTEs for one branch: p_branch_sql (a
rag._branch_sql text, placeholders $1..$8) wrapped so that it yields one row of arrays in
branch-rank order (id, fused-scale value x, raw score s, level, node_type, source_file,
parent_source_file) and the branch floor least(min(x), 0). x is the branch's normalised value:
$9 fusion ('rrf': 1 / ($10 + rank)), $11 normalisation ('minmax' or 'zscore'; a branch whose
scores are all equal gets 1). Kept in its own function so that bench/bench_search.py can
EXPLAIN exactly what the search runs (PREPARE with the same eleven parameters).
Cost: none (string formatting).
*/
    SELECT format(
        'SELECT array_agg(c.id ORDER BY c.r), array_agg(c.x ORDER BY c.r), '
        'array_agg(c.s ORDER BY c.r), array_agg(c.lvl ORDER BY c.r), array_agg(c.nt ORDER BY c.r), '
        'array_agg(c.sf ORDER BY c.r), array_agg(c.pf ORDER BY c.r), least(min(c.x), 0) FROM ('
        'SELECT c0.*, CASE WHEN $9 = ''rrf'' THEN 1.0::float8 / ($10 + c0.r) '
        'WHEN $11 = ''minmax'' THEN coalesce((c0.s - min(c0.s) OVER ()) / nullif(max(c0.s) OVER () - min(c0.s) OVER (), 0), 1) '
        'ELSE coalesce((c0.s - avg(c0.s) OVER ()) / nullif(stddev_pop(c0.s) OVER (), 0), 1) END AS x '
        'FROM (%s) c0) c', p_branch_sql);
$$;
