-- rag._search_hits: rag.search's checks and its modes (the mode list is defined here), for one or more wordings.
CREATE OR REPLACE FUNCTION rag._search_hits(
    p_queries     TEXT[],
    p_vectors     vector[],
    p_mode        TEXT,
    p_k           INT,
    p_book        TEXT,
    p_levels      INT[],
    p_within      TEXT,
    p_expand      TEXT[],
    p_query_model TEXT,
    p_tuning      JSONB
) RETURNS TABLE (wording INT, hit rag.search_hit)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
SET max_parallel_workers_per_gather = 0
SET enable_seqscan = off
SET hnsw.ef_search = 40
SET hnsw.iterative_scan = off
AS $$
/*
Checks rag.search's arguments and returns, for each wording w (p_queries[w] and its vector
p_vectors[w], same length), the rows a search of w alone returns (best first, without cites
and expansions): 'auto' is 'two-stage' when p_levels allows paragraphs, else 'hybrid', and
'hybrid' when two-stage finds no paragraph; 'two-stage' rag._two_stage (p_levels NULL or {0});
'hybrid' rag._hybrid; 'bm25' rag._bm25 alone; 'vector' rag._knn alone (vectors required).
In two-stage and hybrid, with a vector and paragraphs allowed, the sentence branch
(rag._sentences) takes its places (rag._interleave). Raises invalid_parameter_value naming the
value (mode, query, k, book, levels, expand, query model or vector length, a setting, within).
Parallel query and sequential scans off; rag._set_hnsw's settings restored on return.
Cost: the mode's scans per wording; BM25's (rag._bm25) and the sentence branch's in one statement each.
*/
DECLARE
    v_n     INT := cardinality(p_queries);
    v_mode  TEXT := p_mode;
    v_model TEXT;
    v_ids   INT[];
    p       rag.search_settings;
    b_of    INT[];
    b_all   rag.candidate[];
    f_of    INT[];
    f_all   rag.search_hit[];
    f_rows  rag.search_hit[];
    v_sent  BOOLEAN;
    s_of    INT[];
    s_all   rag.search_hit[];
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(v_n, 0) = 0 OR cardinality(p_vectors) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'give one vector (or NULL) per wording: % wordings, % vectors',
            coalesce(v_n, 0), coalesce(cardinality(p_vectors), 0) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR w IN 1..v_n LOOP
        PERFORM rag._check_search_args(p_queries[w], p_k, p_book, p_levels, p_mode <> 'vector');
    END LOOP;
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
    ELSIF p_mode = 'vector' AND array_position(p_vectors, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; vector search needs a vector (see `bookrag embed`)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode <> 'bm25' THEN  -- (bm25 reads no vector: nothing of it is checked)
        FOR w IN 1..v_n LOOP
            CONTINUE WHEN p_vectors[w] IS NULL;
            SELECT m.model INTO v_model FROM rag._corpus_model(p_vectors[w]) m;  -- raises on another length, or several models
            IF p_query_model IS NOT NULL AND v_model IS DISTINCT FROM p_query_model THEN
                RAISE EXCEPTION 'the query was embedded with "%" but the corpus model is "%"; embed it with the corpus model',
                    p_query_model, coalesce(v_model, 'none (no vectors loaded)')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    v_ids := rag._subtree_ids(p_within, p_book);

    IF v_mode = 'bm25' THEN
        SELECT array_agg(x.wording ORDER BY x.wording, (x.c).r), array_agg(x.c ORDER BY x.wording, (x.c).r)
        INTO b_of, b_all FROM rag._bm25(p_queries, p_k, p_book, p_levels, v_ids) x;
        RETURN QUERY  -- (from arrays: the planner sees a few rows and looks each one up)
        SELECT u.w, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
               n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
               u.s, u.r, u.r, u.s, NULL::int, NULL::float8,
               NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
        FROM unnest(b_of, b_all) AS u(w, id, s, r, lvl, sf, pf)
        JOIN rag.hierarchical_content_nodes n ON n.id = u.id
        ORDER BY u.w, u.r;
        RETURN;
    END IF;
    IF v_mode = 'vector' THEN
        IF v_model IS NULL THEN
            RAISE NOTICE 'no embedded rows are loaded; the vector search returns nothing';
            RETURN;
        END IF;
        PERFORM rag._set_hnsw(p_k);
        FOR w IN 1..v_n LOOP
            RETURN QUERY
            SELECT w, ROW(n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph,
                   c.s, c.r, NULL::int, NULL::float8, c.r, c.s,
                   NULL::float8, NULL::int, NULL::float8, NULL::json, NULL::json, NULL::json, n.kind)::rag.search_hit
            FROM rag._knn(v_model, p_vectors[w], p_k, p_book, p_levels, v_ids) c
            JOIN rag.hierarchical_content_nodes n ON n.id = c.id
            ORDER BY c.r;
        END LOOP;
        RETURN;
    END IF;
    IF v_mode = 'two-stage' THEN
        SELECT array_agg(t.wording ORDER BY t.wording, (t.hit).rank), array_agg(t.hit ORDER BY t.wording, (t.hit).rank)
        INTO f_of, f_all FROM rag._two_stage(p_queries, p_vectors, v_model, p_k, p_book, v_ids, p) t;
    END IF;
    v_sent := p.sentence_every > 0 AND p.sentence_after < p_k AND v_model IS NOT NULL AND 0 = ANY(coalesce(p_levels, ARRAY[0]));
    IF v_sent THEN
        SELECT array_agg(s.wording ORDER BY s.wording, (s.hit).rank), array_agg(s.hit ORDER BY s.wording, (s.hit).rank)
        INTO s_of, s_all FROM rag._sentences(v_model, p_vectors, p_k, p_book, v_ids) s;
    END IF;
    FOR w IN 1..v_n LOOP
        f_rows := ARRAY(SELECT f_all[j] FROM generate_subscripts(f_of, 1) j WHERE f_of[j] = w ORDER BY j);
        IF v_mode = 'hybrid' OR (p_mode = 'auto' AND cardinality(f_rows) = 0) THEN
            -- 'auto' when two-stage found no paragraph (words only in summaries, no query vector):
            -- the hybrid list, summaries included, rather than nothing
            f_rows := ARRAY(SELECT h FROM rag._hybrid(p_queries[w], p_vectors[w], v_model, p_k, p_book, p_levels, v_ids, p) h
                            ORDER BY h.rank);
        END IF;
        IF NOT v_sent OR p_vectors[w] IS NULL THEN
            RETURN QUERY SELECT w, h FROM unnest(f_rows) h;
        ELSE
            RETURN QUERY SELECT w, i FROM rag._interleave(f_rows, ARRAY(SELECT s_all[j] FROM generate_subscripts(s_of, 1) j WHERE s_of[j] = w ORDER BY j),
                                                          p.sentence_after, p.sentence_every, p_k) i;
        END IF;
    END LOOP;
END
$$;
