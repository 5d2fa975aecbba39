-- 0009_sentence_hnsw: issue 10/11: the sentence branch scans an HNSW index on rag.sentences (one per model, made by rag._ensure_vector_index) instead of every sentence
-- depends: 0008_sentence_branch

-- function: _ensure_vector_index sha256:0129b50c35b7fca99a33e196b5c82158e8deb0eb0a992cb086bb133ab83fd875
-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Registers (p_model, p_dimension) in rag.embedding_models and creates, if missing, the HNSW
cosine index on embedding::vector(p_dimension) restricted to rows WHERE embedding_model =
p_model: the exact expression and predicate rag._branch_sql uses, so the kNN branch can use it
whatever the model's dimension; and the same index on rag.sentences (named sent_hnsw_…), the
one rag.search_sentences scans. Returns the chunks' index name. A model already registered with
another dimension is an error. Cost: index creation is O(rows of the model) (100k 384-d rows in 140 s with the default
64MB maintenance_work_mem); instant when it exists.
*/
DECLARE
    v_dim   INT;
    v_index TEXT := 'hcn_hnsw_' || substr(md5(p_model), 1, 12);
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL AND v_dim <> p_dimension THEN
        RAISE EXCEPTION 'model "%" is registered with dimension %, not %', p_model, v_dim, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_dim IS NULL THEN
        INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES (p_model, p_dimension, v_index);
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.hierarchical_content_nodes '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
        v_index, p_dimension, p_model);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.sentences '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
        'sent_hnsw_' || substr(md5(p_model), 1, 12), p_dimension, p_model);
    RETURN v_index;
END
$$;

-- function: search_sentences sha256:1e6ff3c746b30a9d3dc2f4372e98a10ce482e8993c12001e05f2e9e3dbdc3a8d
-- rag.search_sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag.search_sentences(
    p_query_embedding vector,
    p_k      INT DEFAULT 10,
    p_book   TEXT DEFAULT NULL,
    p_within TEXT DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Returns at most p_k source paragraphs (level-0 chunks): those cited by the p_k chapter-summary
sentences closest to the query, best first (rag.search_hit; fewer than p_k when those sentences
cite fewer paragraphs). Every anchored sentence of the level-1 summaries (rag.sentences,
embedded alone) is a candidate; a paragraph scores the best cosine similarity among the
sentences whose anchors cite it ([§12–14], docs/anchors.md), ties broken by the paragraph's
own similarity. A paragraph split into several chunks is represented by its chunk closest to
the query. score = sentence_score = that best sentence's similarity, rank = sentence_rank =
1..k; the branch columns (bm25_*, vector_*) and section_score are NULL.
Reworded questions (a reader's modern French against the book's 1840s French) meet the
summaries' wording, and the anchors lead back to the book's own paragraph: this is why the
branch exists (measured in evaluation/experiments/sentence_anchors/ and README).
Parameters:
  p_query_embedding  the query's vector, of the corpus model (required).
  p_k                how many paragraphs, 1..1000 (default 10).
  p_book             NULL (all books) or one book.
  p_within           NULL or a source_file: only paragraphs in that node's subtree.
No sentence loaded (a corpus without anchors, or no vectors): no rows.
Cost: an HNSW scan of the sentences' partial index for the corpus model (rag._ensure_vector_index;
ef_search raised to p_k, iterative scan so the book and within filters do not starve it), a
small dynamic statement planned in microseconds; then a static statement (plan cached) that
looks up, for each paragraph the p_k best sentences cite, its chunks by index. About 0.75 ms
inside the server on the two books, 1.2-1.5 ms p50 from Python (bench/bench_search.py).
*/
DECLARE
    v_model  TEXT;
    v_dim    INT;
    v_within INT[];
    c_file   TEXT[];    -- the sentences' cited paragraphs, one element each: file, number, distance
    c_par    INT[];
    c_dist   FLOAT8[];
BEGIN
    SELECT a.model, a.dimension, a.within_ids INTO v_model, v_dim, v_within
    FROM rag._knn_args('search_sentences', p_query_embedding, p_k, p_book, NULL, NULL, p_within) a;
    IF v_model IS NULL THEN
        RETURN;
    END IF;
    PERFORM rag._set_hnsw(p_k);
    -- The p_k nearest sentences (the paragraphs they cite are exactly the best-ranked ones,
    -- each with its best sentence); the dimension is part of the indexed expression, hence format.
    EXECUTE format(
        'SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) FROM ('
        'SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, '
        '(st.embedding::vector(%1$s) <=> $1::vector(%1$s))::float8 AS d '
        'FROM rag.sentences st WHERE st.embedding_model = %2$L%3$s%4$s '
        'ORDER BY st.embedding::vector(%1$s) <=> $1::vector(%1$s) LIMIT $2) s, unnest(s.ps) AS p(n)',
        v_dim, v_model,
        CASE WHEN p_book IS NOT NULL THEN ' AND st.book = $3' END,
        CASE WHEN v_within IS NOT NULL THEN ' AND st.cited_source_file IN '
            '(SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY($4))' END)
    INTO c_file, c_par, c_dist
    USING p_query_embedding, p_k, p_book, v_within;
    RETURN QUERY
    WITH para AS (
        SELECT c.f, c.n, 1 - min(c.d) AS sim FROM unnest(c_file, c_par, c_dist) AS c(f, n, d) GROUP BY c.f, c.n
    ), one AS (  -- one chunk per paragraph: the one closest to the query (an index lookup each)
        SELECT c.*, para.sim
        FROM para
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order,
                   CASE WHEN n.embedding_model = v_model THEN 1 - (n.embedding <=> p_query_embedding) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (v_within IS NULL OR n.id = ANY(v_within))
            ORDER BY own DESC NULLS LAST, n.chunk_index
            LIMIT 1
        ) c
    ), top AS (
        SELECT one.*, row_number() OVER (ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id)::int AS r
        FROM one
    )
    SELECT top.id, top.source_file, top.chunk_index, top.level, top.node_type, top.heading_path,
           top.parent_source_file, top.content, top.content_token_count, top.book, top.node_order,
           top.sim, top.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, top.r, top.sim
    FROM top
    WHERE top.r <= p_k
    ORDER BY top.r;
END
$$;

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_ensure_vector_index', '0129b50c35b7fca99a33e196b5c82158e8deb0eb0a992cb086bb133ab83fd875', '0009_sentence_hnsw'),
    ('search_sentences', '1e6ff3c746b30a9d3dc2f4372e98a10ce482e8993c12001e05f2e9e3dbdc3a8d', '0009_sentence_hnsw')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();

-- The sentences' HNSW index for every model already registered (later loads make it through
-- rag._ensure_vector_index, the one definition of both indexes).
DO $$ BEGIN PERFORM rag._ensure_vector_index(m.model, m.dimension) FROM rag.embedding_models m; END $$;
