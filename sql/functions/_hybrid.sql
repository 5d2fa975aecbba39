-- rag._hybrid: 'hybrid' mode: both branches fused over every level, a paragraph lifted by its chapter.
CREATE OR REPLACE FUNCTION rag._hybrid(
    p_query  TEXT,
    p_vector vector,
    p_model  TEXT,
    p_k      INT,
    p_book   TEXT,
    p_levels INT[],
    p_ids    INT[],
    p        rag.search_settings
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_k best rows of rag._fuse over both branches' greatest(hybrid_pool, p_k)
candidates, best first: score = fused, and for a paragraph (1 - chapter_weight) x fused +
chapter_weight x its chapter's (its parent summary's best fused score among the candidates,
else the floor; section_score). When p_levels leaves out level 1, the branches read it too and
the filter applies after. Ties: the fused order.
Cost: two index scans, a fusion in memory, p_k lookups.
*/
DECLARE
    v_n      INT := greatest(p.hybrid_pool, p_k);
    v_levels INT[] := CASE WHEN p.chapter_weight > 0 AND NOT 1 = ANY(p_levels) THEN p_levels || 1 ELSE p_levels END;
    b        rag.candidate[];
    v        rag.candidate[];
BEGIN
    b := ARRAY(SELECT x.c FROM rag._bm25(ARRAY[p_query], v_n, p_book, v_levels, p_ids) x);
    IF p_model IS NOT NULL AND p_vector IS NOT NULL THEN
        PERFORM rag._set_hnsw(v_n);
        v := ARRAY(SELECT c FROM rag._knn(p_model, p_vector, v_n, p_book, v_levels, p_ids) c);
    END IF;
    RETURN QUERY
    WITH f AS (
        SELECT * FROM rag._fuse(b, v, p)
    ), ch AS (
        SELECT f.sf, max(f.fused) AS cs FROM f WHERE f.lvl = 1 AND p.chapter_weight > 0 GROUP BY f.sf
    ), c AS (
        SELECT f.*, CASE WHEN f.lvl = 0 AND p.chapter_weight > 0 THEN coalesce(ch.cs, f.floor) END AS cs
        FROM f LEFT JOIN ch ON ch.sf = f.pf
    ), top AS (
        SELECT c.*, CASE WHEN c.lvl <> 0 THEN c.fused
                         ELSE (1 - p.chapter_weight) * c.fused + p.chapter_weight * coalesce(c.cs, 0) END AS score
        FROM c
        WHERE p_levels IS NULL OR c.lvl = ANY(p_levels)
        ORDER BY score DESC, c.rank
        LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, top.rank))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, top.rank;
END
$$;
