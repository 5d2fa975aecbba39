-- rag._fuse: two branches' candidates fused into one ranked list (the fusion formulas, written here only).
CREATE OR REPLACE FUNCTION rag._fuse(
    p_bm25   rag.candidate[],
    p_vector rag.candidate[],
    p        rag.search_settings
) RETURNS SETOF rag.fused
LANGUAGE sql STABLE
AS $$
/*
Returns each candidate of either branch once, with its fused score, floor (a row no branch read)
and rank (ties: the better branch rank, then id). A branch's value x of a candidate:
  'rrf'     1 / (rrf_k + branch rank), 0 when absent; fused = bm25_weight x_b + vector_weight x_v
  'convex'  its score normalised over the branch ('zscore' or 'minmax'; 1 when all equal), the
            branch's floor least(lowest x, 0) when absent;
            fused = (bm25_weight x_b + vector_weight x_v) / (bm25_weight + vector_weight)
Cost: a sort in memory; inlined into the caller's statement.
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
