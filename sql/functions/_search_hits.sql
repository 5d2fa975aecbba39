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
