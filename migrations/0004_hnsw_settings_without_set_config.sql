-- 0004_hnsw_settings_without_set_config: the reader may not call set_config (0003): the search functions raise HNSW settings through rag._set_hnsw
-- depends: 0003_harden_reader_role

-- function: _set_hnsw sha256:904f3883b1c93fe202e15c360c16f7939593bd3c52bbd75a377f70711f838916
-- Raise the HNSW search settings for the current search (callers restore them on return).
CREATE OR REPLACE FUNCTION rag._set_hnsw(p_ef_search INT)
RETURNS VOID
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog
AS $$
/*
Sets hnsw.ef_search to p_ef_search clamped to 40..1000 and hnsw.iterative_scan to
relaxed_order, both transaction-local: a caller that declares `SET hnsw.ef_search` and
`SET hnsw.iterative_scan` in its definition gets its previous values back when it returns.
Why a definer function: bookrag_reader may not execute set_config (migration 0003: a reader
that could change settings could lift its own limits), and a STABLE search function may not
run SET itself. This function can change only these two settings, within bounds.
Cost: two set_config calls, microseconds.
*/
BEGIN
    PERFORM set_config('hnsw.ef_search', greatest(40, least(coalesce(p_ef_search, 40), 1000))::text, true);
    PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
END
$$;

-- function: search_hybrid sha256:1388c96ba9005999f41d4696590ce2efcfe5fa5fcdbb9a6bd19070a383959d12
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

-- function: search_vector sha256:3e6eb2e1c47003a7822115d19269473f362b051c0821f3db891cbbc96e956e49
-- rag.search_vector: semantic kNN search (pgvector HNSW, cosine) with the corpus model.
CREATE OR REPLACE FUNCTION rag.search_vector(
    p_query_embedding vector,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k chunks nearest to p_query_embedding, best first: score = cosine similarity
(1 - cosine distance), vector_rank = rank, vector_score = score; BM25 and section columns NULL.
Parameters:
  p_query_embedding  the query vector from the corpus model (query role for e5 models);
                     its length must equal the model's dimension (error otherwise). Required.
  p_k, p_book, p_levels, p_node_type, p_parent_files: as in rag.search_bm25.
Rows without an embedding (files not embedded) never appear. Only vectors of the corpus
model are compared. Edge case: no vectors loaded -> no rows (NOTICE).
Cost: one HNSW index scan on the model's partial index (ef_search raised to the pool, iterative
scan so filters do not starve the result); p50 0.6 ms on the two books.
Settings: parallel query off (worker start-up costs more than the scans); sequential scans
off, because on small tables the planner prices the HNSW scan above a sequential scan that is
several times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW
settings raised below are restored when the function returns.
*/
DECLARE
    v_model TEXT;
    v_dim   INT;
BEGIN
    IF p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; search_vector needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(NULL, p_k, p_book, p_levels, p_node_type, false);
    SELECT m.model, m.dimension INTO v_model, v_dim FROM rag._corpus_model(p_query_embedding) m;
    IF v_model IS NULL THEN
        RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, '
        'v.s, v.r, NULL::int, NULL::float8, v.r, v.s, NULL::float8 '
        'FROM (%s) v JOIN rag.hierarchical_content_nodes n ON n.id = v.id ORDER BY v.r',
        rag._branch_sql('vector', v_model, v_dim, p_book, p_levels, p_node_type, p_parent_files))
    USING NULL::text, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, p_k;
END
$$;

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_set_hnsw', '904f3883b1c93fe202e15c360c16f7939593bd3c52bbd75a377f70711f838916', '0004_hnsw_settings_without_set_config'),
    ('search_hybrid', '1388c96ba9005999f41d4696590ce2efcfe5fa5fcdbb9a6bd19070a383959d12', '0004_hnsw_settings_without_set_config'),
    ('search_vector', '3e6eb2e1c47003a7822115d19269473f362b051c0821f3db891cbbc96e956e49', '0004_hnsw_settings_without_set_config')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
