-- rag.search_hybrid: BM25 + kNN fused in one statement (normalised score combination or RRF), optionally chapter-aware.
CREATE OR REPLACE FUNCTION rag.search_hybrid(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_parent_files    TEXT[] DEFAULT NULL,
    p_pool            INT DEFAULT 40,
    p_rrf_k           INT DEFAULT 60,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_chapter_weight  FLOAT8 DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_cite_weight     FLOAT8 DEFAULT NULL,
    p_vector_pool     INT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks of both branches fused, best first. Each branch (BM25 top p_pool,
kNN top p_pool, or p_vector_pool when given) gives every candidate a value x:
  fusion 'convex' (default): the branch score normalised over that branch's candidates,
      'zscore' (default): (s - mean) / standard deviation;
      'minmax': (s - min) / (max - min);
      (1 when all the branch's candidates score the same, a lone candidate included);
    a candidate missing from a branch gets that branch's floor: its lowest x, or 0 if that is
    higher (minmax: 0; a branch of one candidate: 0, so its lone hit keeps its lead), and
    fused = (bm25_weight * x_bm25 + vector_weight * x_vector) / (bm25_weight + vector_weight).
  fusion 'rrf': x = 1 / (rrf_k + branch rank), a missing branch adding 0, and
    fused = bm25_weight * x_bm25 + vector_weight * x_vector (Reciprocal Rank Fusion).
Chapter-aware ranking: a paragraph (level 0) takes a share p_chapter_weight of its score from
its chapter, the node it hangs from (its parent summary.md): score = (1 - chapter_weight) *
fused + chapter_weight * chapter, where chapter is the best fused score of that summary's
chunks among the candidates (both branches count), or the fused floor when the summary is not
a candidate; section_score carries that chapter value. Other levels keep score = fused
(section_score NULL). To let chapter summaries compete when p_levels or p_node_type would
exclude them, the branches then also take level-1 rows, and the filters are applied to the
fused result (so fewer than p_k rows may come back in rare cases).
Citation-aware ranking (p_cite_weight > 0): the paragraphs a candidate chapter-summary chunk
cites with its anchors ([§12–14], rag.citations) join the candidates even when no branch found
them (their BM25 value is the branch floor, their vector value their own similarity normalised
like the branch's); a paragraph then takes a share cite_weight of its score from the best fused
score of the candidate chunks citing it (the floor when none does):
score = (1 - chapter_weight - cite_weight) * fused + chapter_weight * chapter + cite_weight * cite.
Ties are broken by the best branch rank, then id. Each row carries its branch ranks and raw
scores (NULL where the chunk was not in that branch's pool).
Parameters:
  p_query            words for the BM25 branch (required, as in rag.search_branch).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 counts.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files, p_within: filters, applied identically to
                     both branches (p_within: a source_file, only its subtree; see rag.search_branch).
  p_pool             candidates taken from each branch, 1..1000 (default 40; at least p_k): the
                     HNSW scan's ef_search is raised to it, so 40 costs what a top-10 kNN costs.
  p_vector_pool      candidates taken from the kNN branch when it should read fewer (or more)
                     than the BM25 branch, 1..1000, not raised to p_k (default NULL: the
                     same as BM25's). The HNSW scan's ef_search follows it instead of p_pool,
                     never below 40 (rag._set_hnsw), so a pool under 40 reads fewer rows for
                     the same cost. rag.search_two_stage reads 100 BM25 candidates and 40 kNN
                     ones in its first search (decision 26).
  p_rrf_k            the RRF constant (default 60), >= 1; used by 'rrf' only.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight:
                     NULL = the default; defaults and bounds are rag._fusion_settings's (convex,
                     zscore, 0.5, 0.5, 0.4, cite 0; names 'rrf'|'convex' and 'minmax'|'zscore',
                     weights finite, >= 0 and not both 0, chapter and cite weights 0..1, sum <= 1).
Rows without an embedding compete on BM25 alone.
Cost: a pg_search top-N scan of p_pool rows and an HNSW scan of p_pool (or p_vector_pool)
rows (two small dynamic statements), then one static statement (cached plan) fusing the two
pools' candidates in memory and reading the p_k rows returned (bench/bench_search.py).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    st           RECORD;
    v_model      TEXT;
    v_dim        INT;
    v_pool       INT;
    v_vpool      INT;          -- the kNN branch's candidates
    v_within     INT[];
    v_levels     INT[] := p_levels;
    v_node_type  TEXT := p_node_type;
    v_refilter   BOOLEAN := false;
    v_floor      FLOAT8;
    v_mean       FLOAT8;  -- the vector branch's raw scores: what a cited paragraph's similarity is normalised by
    v_sd         FLOAT8;
    v_min        FLOAT8;
    v_max        FLOAT8;
    -- each branch's candidates, best first: id, normalised x, raw score, level, node_type,
    -- source_file, parent; and the branch's floor
    b_id INT[]; b_x FLOAT8[]; b_s FLOAT8[]; b_lvl INT[]; b_nt TEXT[]; b_sf TEXT[]; b_pf TEXT[]; b_floor FLOAT8;
    v_id INT[]; v_x FLOAT8[]; v_s FLOAT8[]; v_lvl INT[]; v_nt TEXT[]; v_sf TEXT[]; v_pf TEXT[]; v_floor_v FLOAT8;
    -- a branch's candidates as arrays, x computed over the pool: $9 fusion, $10 rrf_k, $11 normalisation
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                               p_chapter_weight, p_cite_weight);
    IF p_rrf_k IS NULL OR p_rrf_k < 1 THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', coalesce(p_rrf_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_vector_pool < 1 OR p_vector_pool > 1000 THEN  -- NULL: the BM25 pool
        RAISE EXCEPTION 'vector_pool must be between 1 and 1000, got %', p_vector_pool
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_within IS NOT NULL THEN
        v_within := rag._subtree_ids(p_within, p_book);
    END IF;
    IF st.chapter_weight > 0 AND ((p_levels IS NOT NULL AND NOT 1 = ANY(p_levels)) OR p_node_type = 'source') THEN
        v_levels := CASE WHEN p_levels IS NULL THEN NULL ELSE p_levels || 1 END;
        v_node_type := NULL;
        v_refilter := true;
    END IF;
    v_pool := greatest(p_pool, p_k);
    v_vpool := coalesce(p_vector_pool, v_pool);

    -- The two index scans, each a small statement of its own ($1..$8 as in rag._branch_sql).
    EXECUTE rag._collect_sql(rag._branch_sql('bm25', NULL, NULL, p_book, v_levels, v_node_type, p_parent_files, v_within))
    INTO b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf, b_floor
    USING p_query, NULL::vector, p_book, v_levels, v_node_type, p_parent_files, v_pool, v_within,
          st.fusion, p_rrf_k, st.normalisation;
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        IF v_model IS NOT NULL THEN
            PERFORM rag._set_hnsw(v_vpool);
            EXECUTE rag._collect_sql(rag._branch_sql('vector', v_model, v_dim, p_book, v_levels, v_node_type,
                                                      p_parent_files, v_within))
            INTO v_id, v_x, v_s, v_lvl, v_nt, v_sf, v_pf, v_floor_v
            USING NULL::text, p_query_embedding, p_book, v_levels, v_node_type, p_parent_files, v_vpool, v_within,
                  st.fusion, p_rrf_k, st.normalisation;
        END IF;
    END IF;
    b_floor := coalesce(b_floor, 0);
    v_floor_v := coalesce(v_floor_v, 0);
    SELECT avg(x), stddev_pop(x), min(x), max(x) INTO v_mean, v_sd, v_min, v_max FROM unnest(v_s) AS x;
    -- what a row absent from both branches would score: a chapter summary that is no candidate
    v_floor := CASE WHEN st.fusion = 'rrf' THEN 0
                    ELSE (st.bm25_weight * b_floor + st.vector_weight * v_floor_v) / (st.bm25_weight + st.vector_weight) END;

    -- The fusion: a static statement over the two candidate lists (its plan is cached).
    RETURN QUERY
    WITH f AS (
        SELECT coalesce(b.id, v.id) AS id, b.r::int AS br, b.s AS bs, v.r::int AS vr, v.s AS vs,
               coalesce(b.lvl, v.lvl) AS lvl, coalesce(b.nt, v.nt) AS nt, coalesce(b.sf, v.sf) AS sf,
               coalesce(b.pf, v.pf) AS pf,
               CASE WHEN st.fusion = 'rrf' THEN st.bm25_weight * coalesce(b.x, 0) + st.vector_weight * coalesce(v.x, 0)
                    ELSE (st.bm25_weight * coalesce(b.x, b_floor) + st.vector_weight * coalesce(v.x, v_floor_v))
                         / (st.bm25_weight + st.vector_weight) END AS fused
        FROM unnest(b_id, b_x, b_s, b_lvl, b_nt, b_sf, b_pf) WITH ORDINALITY AS b(id, x, s, lvl, nt, sf, pf, r)
        FULL JOIN unnest(v_id, v_x, v_s, v_lvl, v_nt, v_sf, v_pf) WITH ORDINALITY AS v(id, x, s, lvl, nt, sf, pf, r)
          ON b.id = v.id
    ), cited AS (  -- paragraphs cited by candidate chapter-summary chunks: the best citing chunk's score
        SELECT n.id, max(f.fused) AS cite
        FROM f
        JOIN rag.hierarchical_content_nodes s ON s.id = f.id
        JOIN rag.citations ci ON ci.source_file = s.source_file AND ci.chunk_index = s.chunk_index
        JOIN rag.hierarchical_content_nodes n ON n.source_file = ci.cited_source_file AND n.paragraph = ci.cited_paragraph
        WHERE st.cite_weight > 0 AND f.lvl = 1 AND ci.cited_paragraph IS NOT NULL
          AND (p_levels IS NULL OR 0 = ANY(p_levels)) AND (p_node_type IS NULL OR p_node_type = 'source')
          AND (p_parent_files IS NULL OR n.parent_source_file = ANY(p_parent_files))
          AND (v_within IS NULL OR n.id = ANY(v_within))
        GROUP BY n.id
    ), f2 AS (  -- the candidates, and cited paragraphs no branch found (BM25 floor, own similarity)
        SELECT f.*, ct.cite FROM f LEFT JOIN cited ct ON ct.id = f.id
        UNION ALL
        SELECT n.id, NULL, NULL, NULL, NULL, n.level, n.node_type, n.source_file, n.parent_source_file,
               CASE WHEN st.fusion = 'rrf' THEN 0
                    ELSE (st.bm25_weight * b_floor + st.vector_weight * coalesce(
                             CASE WHEN n.embedding IS NULL OR n.embedding_model IS DISTINCT FROM v_model THEN NULL
                                  WHEN st.normalisation = 'minmax'
                                  THEN ((1 - (n.embedding <=> p_query_embedding)) - v_min) / nullif(v_max - v_min, 0)
                                  ELSE ((1 - (n.embedding <=> p_query_embedding)) - v_mean) / nullif(v_sd, 0) END,
                             v_floor_v)) / (st.bm25_weight + st.vector_weight) END,
               ct.cite
        FROM cited ct JOIN rag.hierarchical_content_nodes n ON n.id = ct.id
        WHERE NOT EXISTS (SELECT 1 FROM f WHERE f.id = ct.id)
    ), ch AS (  -- each chapter summary among the candidates: its best chunk
        SELECT f.sf, max(f.fused) AS cs FROM f WHERE f.lvl = 1 AND st.chapter_weight > 0 GROUP BY f.sf
    ), c AS (
        SELECT f.*, CASE WHEN f.lvl = 0 AND st.chapter_weight > 0 THEN coalesce(ch.cs, v_floor) END AS cs
        FROM f2 AS f LEFT JOIN ch ON ch.sf = f.pf
    ), top AS (
        SELECT f.id, f.br, f.bs, f.vr, f.vs, f.cs,
               CASE WHEN f.lvl <> 0 THEN f.fused
                    ELSE (1 - st.chapter_weight - st.cite_weight) * f.fused
                         + st.chapter_weight * coalesce(f.cs, 0) + st.cite_weight * coalesce(f.cite, v_floor) END AS score
        FROM c AS f
        WHERE NOT v_refilter OR ((p_levels IS NULL OR f.lvl = ANY(p_levels)) AND (p_node_type IS NULL OR f.nt = p_node_type))
        ORDER BY score DESC, least(f.br, f.vr), f.id
        LIMIT p_k
    )
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
           top.score, (row_number() OVER (ORDER BY top.score DESC, least(top.br, top.vr), top.id))::int,
           top.br, top.bs, top.vr, top.vs, top.cs, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json
    FROM top JOIN rag.hierarchical_content_nodes n ON n.id = top.id
    ORDER BY top.score DESC, least(top.br, top.vr), top.id;
END
$$;
