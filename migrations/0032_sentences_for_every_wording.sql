-- 0032_sentences_for_every_wording: the sentence branch searches every wording's vector in one statement (rag._sentences takes an array); rows unchanged
-- depends: 0031_bm25_header

-- Signatures or row types changed: drop what CREATE OR REPLACE cannot change.
DROP FUNCTION IF EXISTS rag._sentences(text, vector, int, text, int[]);  -- arguments or result changed

-- function: _search_hits sha256:0a2f8d5939b18c0c9b858c73b943d0cf6f6c59c8340485096021e7238db33b02
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

-- function: _sentences sha256:90fb1659b99f9cf701d3ab0a1225400521094eaf787ac69b7ab9c4566ab27429
-- rag._sentences: the sentence branch: paragraphs ranked by the chapter-summary sentences that cite them.
CREATE OR REPLACE FUNCTION rag._sentences(
    p_model   TEXT,
    p_vectors vector[],
    p_k       INT,
    p_book    TEXT,
    p_ids     INT[]
) RETURNS TABLE (wording INT, hit rag.search_hit)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns, for each vector p_vectors[wording] (NULL: no row), at most p_k paragraphs, best first:
those cited by the 2 x p_k chapter-summary sentences (rag.sentences) nearest to it, each scored
by its best citing sentence's similarity (sentence_score, sentence_rank; ties by its own
similarity), by its chunk nearest the vector. The sentences come from the halfvec HNSW index
(rag._knn_sentences), or exactly within p_ids's subtree. Rows by wording, then rank.
Cost: one statement; per vector an HNSW scan of 2 x p_k sentences and a lookup per paragraph.
*/
BEGIN
    IF p_ids IS NULL THEN
        PERFORM rag._set_hnsw(2 * p_k);
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT u.v, u.i::int AS i FROM unnest(p_vectors) WITH ORDINALITY AS u(v, i) WHERE u.v IS NOT NULL
    ), s AS (
        SELECT q.i, k.cited_source_file AS f, k.cited_paragraphs AS ps, k.distance AS d
        FROM q CROSS JOIN LATERAL rag._knn_sentences(p_model, q.v, 2 * p_k, p_book) k WHERE p_ids IS NULL
        UNION ALL
        SELECT q.i, exact.* FROM q CROSS JOIN LATERAL (
            SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> q.v)::float8
            FROM rag.sentences st
            WHERE p_ids IS NOT NULL AND st.embedding_model = p_model AND (p_book IS NULL OR st.book = p_book)
              AND st.cited_source_file IN (SELECT w.source_file FROM rag.hierarchical_content_nodes w WHERE w.id = ANY(p_ids))
            ORDER BY st.embedding <=> q.v LIMIT 2 * p_k) exact
    ), cited AS (
        SELECT s.i, s.f, c.n, 1 - min(s.d) AS sim FROM s, unnest(s.ps) AS c(n) GROUP BY s.i, s.f, c.n
    ), para AS (  -- the paragraphs that can rank within p_k: ties at the cut stay (own similarity breaks them)
        SELECT x.i, x.f, x.n, x.sim FROM (SELECT cited.*, rank() OVER (PARTITION BY cited.i ORDER BY cited.sim DESC) AS r FROM cited) x
        WHERE x.r <= p_k
    ), one AS (
        SELECT para.i, c.*, para.sim FROM para JOIN q ON q.i = para.i
        CROSS JOIN LATERAL (
            SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
                   n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, n.kind,
                   CASE WHEN n.embedding_model = p_model THEN 1 - (n.embedding <=> q.v) END AS own
            FROM rag.hierarchical_content_nodes n
            WHERE n.source_file = para.f AND n.paragraph = para.n AND n.level = 0
              AND (p_ids IS NULL OR n.id = ANY(p_ids))
            ORDER BY own DESC NULLS LAST, n.chunk_index LIMIT 1) c
    ), top AS (
        SELECT one.*, (row_number() OVER (PARTITION BY one.i ORDER BY one.sim DESC, one.own DESC NULLS LAST, one.id))::int AS r FROM one
    )
    SELECT t.i, ROW(t.id, t.source_file, t.chunk_index, t.level, t.node_type, t.heading_path,
           t.parent_source_file, t.content, t.content_token_count, t.book, t.node_order, t.paragraph,
           t.sim, t.r, NULL::int, NULL::float8, NULL::int, NULL::float8, NULL::float8, t.r, t.sim,
           NULL::json, NULL::json, NULL::json, t.kind)::rag.search_hit
    FROM top t WHERE t.r <= p_k ORDER BY t.i, t.r;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_search_hits', '0a2f8d5939b18c0c9b858c73b943d0cf6f6c59c8340485096021e7238db33b02', '0032_sentences_for_every_wording'),
    ('_sentences', '90fb1659b99f9cf701d3ab0a1225400521094eaf787ac69b7ab9c4566ab27429', '0032_sentences_for_every_wording')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
