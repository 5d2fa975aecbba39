-- rag.search_hybrid: BM25 + kNN fused by Reciprocal Rank Fusion, in one statement.
CREATE OR REPLACE FUNCTION rag.search_hybrid(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_parent_files    TEXT[] DEFAULT NULL,
    p_pool            INT DEFAULT 100,
    p_rrf_k           INT DEFAULT 60,
    p_bm25_weight     FLOAT8 DEFAULT 1.0,
    p_vector_weight   FLOAT8 DEFAULT 1.0
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks by RRF: score = bm25_weight / (rrf_k + bm25_rank)
+ vector_weight / (rrf_k + vector_rank), a missing branch adding 0; ties broken by the best
branch rank, then id. Each row also carries its branch ranks and scores (NULL where the chunk
was not in that branch's pool).
Parameters:
  p_query            words for the BM25 branch (required, as in rag.search_bm25).
  p_query_embedding  vector for the kNN branch, or NULL: then only BM25 ranks count.
  p_k                rows returned, 1..1000 (default 10).
  p_book, p_levels, p_node_type, p_parent_files: filters, applied identically to both branches.
  p_pool             candidates taken from each branch, p_k..1000 (default 100).
  p_rrf_k            the RRF constant (default 60), >= 1.
  p_bm25_weight, p_vector_weight  per-branch weights >= 0 (default 1, 1).
Rows without an embedding compete on BM25 alone.
Cost: one statement: a pg_search top-N scan and an HNSW scan of p_pool rows each, a hash
join of at most 2 x p_pool ids; p50 2.6 ms on the two books (4,317 rows), 9.3 ms at 100k rows
(bench/bench_search.py).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    v_model TEXT;
    v_dim   INT;
    v_pool  INT;
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
    IF p_rrf_k IS NULL OR p_rrf_k < 1 THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', coalesce(p_rrf_k::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_bm25_weight, -1) < 0 OR coalesce(p_vector_weight, -1) < 0 THEN
        RAISE EXCEPTION 'branch weights must be >= 0, got bm25 % and vector %', p_bm25_weight, p_vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_pool IS NULL OR p_pool < 1 OR p_pool > 1000 THEN
        RAISE EXCEPTION 'pool must be between 1 and 1000, got %', coalesce(p_pool::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_pool := greatest(p_pool, p_k);
    IF p_query_embedding IS NOT NULL THEN
        SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
        PERFORM rag._set_hnsw(v_pool);
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH b AS (%s), v AS (%s), f AS ('
        '  SELECT coalesce(b.id, v.id) AS id,'
        '         coalesce($8 / ($10 + b.r), 0) + coalesce($9 / ($10 + v.r), 0) AS score,'
        '         b.r AS br, b.s AS bs, v.r AS vr, v.s AS vs'
        '  FROM b FULL JOIN v ON b.id = v.id) '
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'f.score, (row_number() OVER (ORDER BY f.score DESC, least(f.br, f.vr), f.id))::int, '
        'f.br, f.bs, f.vr, f.vs, NULL::float8 '
        'FROM f JOIN rag.hierarchical_content_nodes n ON n.id = f.id '
        'ORDER BY f.score DESC, least(f.br, f.vr), f.id LIMIT $11',
        rag._branch_sql('bm25', NULL, NULL, p_book, p_levels, p_node_type, p_parent_files),
        rag._branch_sql('vector', CASE WHEN p_query_embedding IS NULL THEN NULL ELSE v_model END,
                        v_dim, p_book, p_levels, p_node_type, p_parent_files))
    USING p_query, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, v_pool,
          p_bm25_weight, p_vector_weight, p_rrf_k::float8, p_k;
END
$$;
