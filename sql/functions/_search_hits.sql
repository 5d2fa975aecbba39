-- rag._search_hits: rag.search's checks and its modes (the mode list is defined here).
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_query       TEXT,
    p_vector      vector,
    p_mode        TEXT,
    p_k           INT,
    p_book        TEXT,
    p_levels      INT[],
    p_within      TEXT,
    p_expand      TEXT[],
    p_query_model TEXT,
    p_tuning      JSONB
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Checks rag.search's arguments and returns the mode's rows (rag.search_hit, best first, without
cites and expansions): 'auto' is 'two-stage' when p_levels allows paragraphs, else 'hybrid',
and 'hybrid' when two-stage finds no paragraph; 'two-stage' rag._two_stage (p_levels NULL or
{0}); 'hybrid' rag._hybrid; 'bm25' rag._bm25 alone; 'vector' rag._knn alone (p_vector required).
In two-stage and hybrid, with a vector and paragraphs allowed, the sentence branch
(rag._sentences) takes its places (rag._interleave). Raises invalid_parameter_value naming the
value (mode, query, k, book, levels, expand, query model or vector length, a setting, within).
Parallel query and sequential scans off; rag._set_hnsw's settings restored on return.
*/
DECLARE
    v_mode  TEXT := p_mode;
    v_model TEXT;
    v_ids   INT[];
    p       rag.search_settings;
    f_rows  rag.search_hit[];
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_mode <> 'vector');
    IF p_expand IS NOT NULL AND NOT p_expand <@ ARRAY['parent', 'cited'] THEN
        RAISE EXCEPTION 'expand takes parent and cited, got "%"',
            (SELECT string_agg(coalesce(e, 'NULL'), ', ') FROM unnest(p_expand) e WHERE e IS NULL OR e NOT IN ('parent', 'cited'))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p := rag._settings(p_tuning);
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) THEN 'two-stage' ELSE 'hybrid' END;
    ELSIF p_mode = 'two-stage' AND NOT coalesce(p_levels <@ ARRAY[0], true) THEN
        RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0}, got levels %',
            p_levels USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_mode = 'vector' AND p_vector IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; vector search needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_vector IS NOT NULL AND p_mode <> 'bm25' THEN  -- (bm25 reads no vector: nothing of it is checked)
        SELECT m.model INTO v_model FROM rag._corpus_model(p_vector) m;  -- raises on another length, or several models
        IF p_query_model IS NOT NULL AND v_model IS DISTINCT FROM p_query_model THEN
            RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    v_ids := rag._subtree_ids(p_within, p_book);

    IF v_mode IN ('bm25', 'vector') THEN
        IF v_mode = 'vector' AND v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
        RETURN QUERY
        SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               c.s, c.r, CASE WHEN v_mode = 'bm25' THEN c.r END, CASE WHEN v_mode = 'bm25' THEN c.s END,
               CASE WHEN v_mode = 'vector' THEN c.r END, CASE WHEN v_mode = 'vector' THEN c.s END,
               NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind
        FROM (SELECT * FROM rag._bm25(p_query, p_k, p_book, p_levels, v_ids) WHERE v_mode = 'bm25'
              UNION ALL
              SELECT * FROM rag._knn(v_model, p_vector, p_k, p_book, p_levels, v_ids) WHERE v_mode = 'vector') c
        JOIN rag.hierarchical_content_nodes n ON n.id = c.id
        ORDER BY c.r;
        RETURN;
    END IF;
    IF v_mode = 'two-stage' THEN
        f_rows := ARRAY(SELECT h FROM rag._two_stage(p_query, p_vector, v_model, p_k, p_book, v_ids, p) h ORDER BY h.rank);
    END IF;
    IF v_mode = 'hybrid' OR (p_mode = 'auto' AND cardinality(f_rows) = 0) THEN
        -- 'auto' when two-stage found no paragraph (words only in summaries, no query vector):
        -- the hybrid list, summaries included, rather than nothing
        f_rows := ARRAY(SELECT h FROM rag._hybrid(p_query, p_vector, v_model, p_k, p_book, p_levels, v_ids, p) h ORDER BY h.rank);
    END IF;
    IF p.sentence_every = 0 OR p.sentence_after >= p_k OR v_model IS NULL OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) THEN
        RETURN QUERY SELECT * FROM unnest(f_rows);
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM rag._interleave(f_rows, ARRAY(SELECT s FROM rag._sentences(v_model, p_vector, p_k, p_book, v_ids) s),
                                               p.sentence_after, p.sentence_every, p_k);
END
$$;
