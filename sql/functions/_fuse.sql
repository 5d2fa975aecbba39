-- rag._fuse: two branches' candidates fused into one ranked list (the fusion formulas, written here only).
CREATE OR REPLACE FUNCTION rag._fuse(
    p_bm25   rag.candidate[],
    p_vector rag.candidate[],
    p        rag.search_settings
) RETURNS SETOF rag.fused
LANGUAGE sql STABLE
AS $$
/*
Returns every candidate of either branch once, with its fused score and its rank in the fused
list (1 = best; ties broken by the better branch rank, then id). Each branch gives each of its
candidates a value x:
  fusion 'rrf'     x = 1 / (rrf_k + branch rank); a missing branch adds 0;
                   fused = bm25_weight * x_bm25 + vector_weight * x_vector
  fusion 'convex'  x = the branch score normalised over that branch's candidates: 'zscore'
                   (s - mean) / standard deviation, 'minmax' (s - min) / (max - min); 1 when all
                   the branch's candidates score the same (a lone candidate included); a row
                   missing from a branch gets that branch's floor, least(its lowest x, 0);
                   fused = (bm25_weight * x_bm25 + vector_weight * x_vector) / (bm25_weight + vector_weight)
floor is the fused score of a row no branch read (0 under 'rrf').
Parameters: each branch's candidates (rag._bm25, rag._knn, or any rows of that shape: ids
unique within a branch, r its 1-based ranks); p from rag._settings.
Cost: a sort of the candidates in memory; inlined into the caller's statement.
*/
    WITH c AS (
        SELECT 'b' AS branch, u.* FROM unnest(p_bm25) u
        UNION ALL
        SELECT 'v', u.* FROM unnest(p_vector) u
    ), x AS (
        SELECT c.*,
               CASE WHEN (p).fusion = 'rrf' THEN 1.0::float8 / ((p).rrf_k + c.r)
                    WHEN (p).normalisation = 'minmax'
                    THEN coalesce((c.s - min(c.s) OVER w) / nullif(max(c.s) OVER w - min(c.s) OVER w, 0), 1)
                    ELSE coalesce((c.s - avg(c.s) OVER w) / nullif(stddev_pop(c.s) OVER w, 0), 1) END AS x
        FROM c WINDOW w AS (PARTITION BY c.branch)
    ), fl AS (
        SELECT coalesce(least(min(x.x) FILTER (WHERE x.branch = 'b'), 0), 0) AS b,
               coalesce(least(min(x.x) FILTER (WHERE x.branch = 'v'), 0), 0) AS v
        FROM x
    ), g AS (
        SELECT x.id, max(x.r) FILTER (WHERE x.branch = 'b') AS br, max(x.s) FILTER (WHERE x.branch = 'b') AS bs,
               max(x.r) FILTER (WHERE x.branch = 'v') AS vr, max(x.s) FILTER (WHERE x.branch = 'v') AS vs,
               max(x.x) FILTER (WHERE x.branch = 'b') AS xb, max(x.x) FILTER (WHERE x.branch = 'v') AS xv,
               max(x.lvl) AS lvl, max(x.sf) AS sf, max(x.pf) AS pf
        FROM x GROUP BY x.id
    ), f AS (
        SELECT g.id, g.br, g.bs, g.vr, g.vs, g.lvl, g.sf, g.pf,
               CASE WHEN (p).fusion = 'rrf' THEN (p).bm25_weight * coalesce(g.xb, 0) + (p).vector_weight * coalesce(g.xv, 0)
                    ELSE ((p).bm25_weight * coalesce(g.xb, fl.b) + (p).vector_weight * coalesce(g.xv, fl.v))
                         / ((p).bm25_weight + (p).vector_weight) END AS fused,
               CASE WHEN (p).fusion = 'rrf' THEN 0
                    ELSE ((p).bm25_weight * fl.b + (p).vector_weight * fl.v) / ((p).bm25_weight + (p).vector_weight) END AS floor
        FROM g CROSS JOIN fl
    )
    SELECT f.*, (row_number() OVER (ORDER BY f.fused DESC, least(f.br, f.vr), f.id))::int FROM f;
$$;
