-- rag.search_branch: one branch of the hybrid search alone: BM25 (pg_search) or kNN (pgvector HNSW).
CREATE OR REPLACE FUNCTION rag.search_branch(
    p_query           TEXT,
    p_query_embedding vector,
    p_branch          TEXT,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_node_type       TEXT DEFAULT NULL,
    p_within          TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns the p_k best chunks of one branch, best first, rank 1..k:
  'bm25'    lexical search over p_query (pg_search BM25, French stemming): score = bm25_score =
            the BM25 score, bm25_rank = rank; p_query_embedding unused. Any term may match (|||);
            the query is tokenized like the index (French stemmer, stopwords, ASCII folding),
            never parsed. A query of only stopwords or punctuation matches nothing (no rows).
  'vector'  semantic kNN of p_query_embedding (cosine, the corpus model only): score =
            vector_score = 1 - cosine distance, vector_rank = rank; p_query unused. Rows without
            an embedding never appear; no vectors loaded -> no rows (NOTICE).
The other branch's columns, section_score, the sentence columns, cites, parent and cited are NULL.
rag.search's modes 'bm25' and 'vector' are this function (with cites); rag.search_hybrid fuses
the same two statements (rag._branch_sql).
Parameters (in rag.search's order):
  p_query            words to search ('bm25': required, <= 10,000 characters).
  p_query_embedding  the query vector from the corpus model, query role for e5 models
                     ('vector': required; its length must be the model's dimension).
  p_branch           'bm25' or 'vector'; anything else is an error naming it.
  p_k                how many chunks, 1..1000 (default 10).
  p_book             NULL = all books, else a folder under corpus/ (unknown book: error).
  p_levels           NULL = all, else e.g. '{0}' paragraphs only, '{1,2}' section and part summaries.
  p_node_type        NULL, 'source' or 'summary'.
  p_within           NULL, or a source_file: only rows of that node and of the nodes below it
                     (a chapter's summary.md: the summary and its paragraphs). A file that is not
                     loaded, or that is in another book than p_book, is an error.
Cost: one index scan with the filters pushed down — pg_search top-N for 'bm25', HNSW on the
model's partial index for 'vector' (ef_search raised to k, at least 40; iterative scan so filters
do not starve the result) — planned as a small dynamic statement; p50 1.9 ms ('bm25') and 1.4 ms
('vector') from Python on the two books (bench/bench_search.py, migration 0011).
Settings: parallel query off (worker start-up costs more than the scans); sequential scans off,
because on small tables the planner prices the HNSW scan above a sequential scan that is several
times slower (8 ms against 1.2 ms for the kNN branch on the two books); the HNSW settings raised
below are restored when the function returns.
*/
DECLARE
    v_model  TEXT;
    v_dim    INT;
    v_within INT[];
BEGIN
    IF p_branch IS DISTINCT FROM 'bm25' AND p_branch IS DISTINCT FROM 'vector' THEN
        RAISE EXCEPTION 'branch must be bm25 or vector, got "%"', coalesce(p_branch, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_branch = 'bm25' THEN
        PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
        v_within := rag._subtree_ids(p_within, p_book);
    ELSE
        SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
        FROM rag._knn_args('vector search', p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within) a;
        IF v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path, '
        'n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, b.s, b.r, %s, '
        'NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json '
        'FROM (%s) b JOIN rag.hierarchical_content_nodes n ON n.id = b.id ORDER BY b.r',
        CASE p_branch WHEN 'bm25' THEN 'b.r, b.s, NULL::int, NULL::float8' ELSE 'NULL::int, NULL::float8, b.r, b.s' END,
        rag._branch_sql(p_branch, v_model, v_dim, p_book, p_levels, p_node_type, NULL, v_within))
    USING p_query, p_query_embedding, p_book, p_levels, p_node_type, NULL::text[], p_k, v_within;
END
$$;
