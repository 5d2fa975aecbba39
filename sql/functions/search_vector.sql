-- rag.search_vector: semantic kNN search (pgvector HNSW, cosine) with the corpus model.
CREATE OR REPLACE FUNCTION rag.search_vector(
    p_query_embedding vector,
    p_k            INT DEFAULT 10,
    p_book         TEXT DEFAULT NULL,
    p_levels       INT[] DEFAULT NULL,
    p_node_type    TEXT DEFAULT NULL,
    p_parent_files TEXT[] DEFAULT NULL,
    p_within       TEXT DEFAULT NULL
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
  p_k, p_book, p_levels, p_node_type, p_parent_files, p_within: as in rag.search_bm25.
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
    v_within INT[];
BEGIN
    SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
    FROM rag._knn_args('search_vector', p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within) a;
    IF v_model IS NULL THEN
        RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, '
        'v.s, v.r, NULL::int, NULL::float8, v.r, v.s, NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json '
        'FROM (%s) v JOIN rag.hierarchical_content_nodes n ON n.id = v.id ORDER BY v.r',
        rag._branch_sql('vector', v_model, v_dim, p_book, p_levels, p_node_type, p_parent_files, v_within))
    USING NULL::text, p_query_embedding, p_book, p_levels, p_node_type, p_parent_files, p_k, v_within;
END
$$;
