-- 0009_sentence_hnsw: issue 10/11: the sentence branch scans an HNSW index on rag.sentences (one per model, made by rag._ensure_vector_index) instead of every sentence
-- depends: 0008_sentence_branch

-- A subtree's sentences (rag.search_sentences with p_within): found by the file they cite.
CREATE INDEX IF NOT EXISTS sentences_cited_idx ON rag.sentences (cited_source_file);
COMMENT ON INDEX rag.sentences_cited_idx IS
    'The sentences citing a file: rag.search_sentences ranks a subtree''s sentences exactly through it.';

-- function: _ensure_vector_index sha256:524e62f50833219a504cf08624c11e64ca952a1b9d4f47a9c1bd240576f0fef8
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
    v_table TEXT;
    v_name  TEXT;
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
    FOR v_table, v_name IN VALUES ('hierarchical_content_nodes', v_index),
                                  ('sentences', 'sent_hnsw_' || substr(md5(p_model), 1, 12)) LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON rag.%I '
            'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
            v_name, v_table, p_dimension, p_model);
    END LOOP;
    RETURN v_index;
END
$$;

-- function: _search_hits sha256:327f825946b06d1ac0d3b0ef6fc4d369a290f8e7542259ba7209e9aba0ad1154
-- rag._search_hits: the mode dispatcher behind rag.search (the mode list is defined and checked here).
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_query           TEXT,
    p_query_embedding vector,
    p_mode            TEXT,
    p_k               INT,
    p_book            TEXT,
    p_levels          INT[],
    p_node_type       TEXT,
    p_within          TEXT,
    p_fusion          TEXT,
    p_normalisation   TEXT,
    p_bm25_weight     FLOAT8,
    p_vector_weight   FLOAT8,
    p_chapter_weight  FLOAT8,
    p_cite_weight     FLOAT8,
    p_sentence_after  INT,
    p_sentence_every  INT,
    p_expand          TEXT[],
    p_query_model     TEXT
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Checks rag.search's arguments and runs the search named by p_mode, returning its rows
(rag.search_hit, best first), unchanged except in 'hybrid':
  'hybrid'     rag.search_hybrid (both branches fused; the default), with the sentence
               branch's paragraphs (rag.search_sentences) in the places p_sentence_after
               and p_sentence_every give them (rag._fusion_settings): after the first
               sentence_after fused hits, one place in every sentence_every goes to the
               sentence branch's best paragraph not already in the fused list (no chunk of
               the same paragraph there); when the fused list runs out, the sentence branch
               fills the remaining places. The merged list is cut at p_k and ranked again
               1..k (a placed row's score is its sentence score; rank, not score, orders the
               list). Not applied when the filters exclude paragraphs (levels without 0,
               node_type 'summary') or without a query vector.
  'bm25'       rag.search_bm25
  'vector'     rag.search_vector (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; no levels or node_type filter)
Any other mode is an error naming it; so is a word of p_expand other than 'parent' and 'cited',
and a p_query_model that is not the corpus model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid adds rag.search_sentences and
the merge (about 1.2 ms per search on the two books, 2.6 ms at 100k rows: bench/bench_search.py).
*/
DECLARE
    v_model TEXT;
    st      RECORD;
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels or node_type filter'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_query_model IS NOT NULL AND p_query_embedding IS NOT NULL THEN
        SELECT m.model INTO v_model FROM rag._corpus_model(NULL) m;
        IF v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_mode = 'hybrid' THEN
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        IF st.sentence_every = 0 OR st.sentence_after >= p_k OR p_query_embedding IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) OR p_node_type = 'summary' THEN
            RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                p_cite_weight => p_cite_weight);
            RETURN;
        END IF;
        -- Merge: fused row i keeps key i; the sentence branch's j-th new paragraph gets key
        -- after + (j - 1) * (every - 1) + 0.5, i.e. it lands at place after + 1 + (j - 1) * every
        -- while fused rows remain, and fills the places after them (ties: sentence rank).
        RETURN QUERY
        WITH base AS (
            SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                p_cite_weight => p_cite_weight)
        ), listed AS (  -- the paragraphs the fused list holds (any of their chunks; a primary-key lookup each)
            SELECT b.source_file, (SELECT n.paragraph FROM rag.hierarchical_content_nodes n WHERE n.id = b.id) AS paragraph
            FROM base b
            WHERE b.level = 0
        ), placed AS (
            SELECT s.*, row_number() OVER (ORDER BY s.rank) AS j
            FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s
            WHERE NOT EXISTS (SELECT 1 FROM listed l WHERE l.source_file = s.source_file AND l.paragraph =
                              (SELECT n.paragraph FROM rag.hierarchical_content_nodes n WHERE n.id = s.id))
        ), merged AS (
            SELECT b.*, b.rank::float8 AS key FROM base b
            UNION ALL
            SELECT p.id, p.source_file, p.chunk_index, p.level, p.node_type, p.heading_path, p.parent_source_file,
                   p.content, p.content_token_count, p.book, p.node_order, p.score, p.rank, p.bm25_rank,
                   p.bm25_score, p.vector_rank, p.vector_score, p.section_score, p.sentence_rank, p.sentence_score,
                   st.sentence_after + (p.j - 1) * (st.sentence_every - 1) + 0.5
            FROM placed p
        )
        SELECT m.id, m.source_file, m.chunk_index, m.level, m.node_type, m.heading_path, m.parent_source_file,
               m.content, m.content_token_count, m.book, m.node_order, m.score,
               (row_number() OVER (ORDER BY m.key, m.sentence_rank))::int, m.bm25_rank, m.bm25_score, m.vector_rank,
               m.vector_score, m.section_score, m.sentence_rank, m.sentence_score
        FROM merged m
        ORDER BY m.key, m.sentence_rank
        LIMIT p_k;
    ELSIF p_mode = 'two-stage' THEN
        RETURN QUERY SELECT * FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
            p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
            p_vector_weight => p_vector_weight);
    ELSIF p_mode = 'bm25' THEN
        RETURN QUERY SELECT * FROM rag.search_bm25(p_query, p_k, p_book, p_levels, p_node_type, p_within => p_within);
    ELSE
        RETURN QUERY SELECT * FROM rag.search_vector(p_query_embedding, p_k, p_book, p_levels, p_node_type, p_within => p_within);
    END IF;
END
$$;

-- function: search_sentences sha256:03d7156928397b2bb0da46e87c174b351ed7bb8af2584a68c4b491bbd7783434
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
sentences nearest to the query (see below), best first (rag.search_hit; fewer than p_k when those sentences
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
The nearest sentences are approximate (HNSW), except within a subtree, where they are exact.
Cost: an HNSW scan of the sentences' partial index for the corpus model (rag._ensure_vector_index;
ef_search raised to p_k, iterative scan so a book filter does not starve it) or, with p_within,
an exact ranking of the subtree's sentences (rag.sentences_cited_idx); a small dynamic
statement planned in microseconds; then a static statement (plan cached) that looks up, for
each paragraph the p_k best sentences cite, its chunks by index. About 0.75 ms inside the
server on the two books, 1.2-1.5 ms p50 from Python (bench/bench_search.py).
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
    -- each with its best sentence). Whole corpus or a book: the HNSW index (its expression has
    -- the dimension in it, hence format). Within a subtree: the few sentences citing its files,
    -- found by rag.sentences_cited_idx and ranked exactly (an expression the HNSW index does not
    -- match), because an index scan filtered that narrowly can stop (hnsw.max_scan_tuples) before
    -- it has found p_k of them.
    EXECUTE format(
        'SELECT array_agg(s.f), array_agg(p.n), array_agg(s.d) FROM ('
        'SELECT st.cited_source_file AS f, st.cited_paragraphs AS ps, (%1$s)::float8 AS d '
        'FROM rag.sentences st WHERE st.embedding_model = %2$L%3$s%4$s '
        'ORDER BY %1$s LIMIT $2) s, unnest(s.ps) AS p(n)',
        CASE WHEN v_within IS NULL THEN format('st.embedding::vector(%1$s) <=> $1::vector(%1$s)', v_dim)
             ELSE 'st.embedding <=> $1' END,
        v_model,
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
    ('_ensure_vector_index', '524e62f50833219a504cf08624c11e64ca952a1b9d4f47a9c1bd240576f0fef8', '0009_sentence_hnsw'),
    ('_search_hits', '327f825946b06d1ac0d3b0ef6fc4d369a290f8e7542259ba7209e9aba0ad1154', '0009_sentence_hnsw'),
    ('search_sentences', '03d7156928397b2bb0da46e87c174b351ed7bb8af2584a68c4b491bbd7783434', '0009_sentence_hnsw')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();

-- The sentences' HNSW index for every model already registered (later loads make it through
-- rag._ensure_vector_index, the one definition of both indexes).
DO $$ BEGIN PERFORM rag._ensure_vector_index(m.model, m.dimension) FROM rag.embedding_models m; END $$;
