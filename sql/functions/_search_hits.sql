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
(rag.search_hit, best first), unchanged except in 'hybrid' and 'two-stage':
  'auto'       the default (since migration 0014, decision 23): 'two-stage' when the filters
               allow paragraphs (no levels filter or levels {0}, no node_type or 'source'),
               'hybrid' otherwise (levels naming a summary level, node_type 'summary'), so the
               default ranks paragraphs inside the best sections and still finds summaries
               when asked for them; and 'hybrid' too when two-stage finds no paragraph (the
               words are only in summaries and there is no query vector: a corpus without
               vectors), so the default never answers nothing where hybrid answers. Two-stage
               is never below hybrid on any set, tuning or held-out half, and ahead on the mean
               (recall@5 / MRR@10 held-out: Bastiat 0.500 / 0.582 against 0.500 / 0.572,
               Tocqueville 0.615 / 0.712 against 0.600 / 0.659, PIAF paragraphs 0.917 / 0.812
               against 0.890 / 0.738), at about hybrid's time for the plain call (the generated
               function below; 1.3 times through the general functions). Chapter and cite
               weights only act when it runs hybrid.
  'hybrid'     rag.search_hybrid (both branches fused over every level), with the sentence
               branch's paragraphs (rag.search_sentences) in the places p_sentence_after
               and p_sentence_every give them (rag._fusion_settings), interleaved: place
               p (1..k) is the sentence branch's when p > sentence_after and
               (p - sentence_after - 1) is a multiple of sentence_every, the fused list's
               otherwise; each place takes its list's next row whose paragraph (any of its
               chunks) is not placed yet (a fused row: not placed by the branch, so two chunks
               of one long paragraph in the fused list both stay), so a paragraph both lists
               hold takes the better of its two places; when one list runs out, the other
               fills the remaining places.
               The merged list is ranked again 1..k (a placed row's score is its sentence
               score, and it keeps the fused row's branch columns when the fused list holds
               the same chunk; rank, not score, orders the list). Not applied when the filters
               exclude paragraphs (levels without 0, node_type 'summary') or without a
               query vector.
  'bm25'       rag.search_branch, branch 'bm25' (p_query_embedding unused)
  'vector'     rag.search_branch, branch 'vector' (p_query unused; p_query_embedding required)
  'two-stage'  rag.search_two_stage (sections first; paragraphs only, so levels {0} and node_type
               'source' are the only filters it takes, and change nothing), merged
               with the sentence branch as 'hybrid' is (its list in place of the fused one).
               Measured on the tuning halves (recall@5 / MRR@10, Bastiat 0.571 / 0.864 ->
               0.571 / 0.881, Tocqueville 0.556 / 0.718 -> 0.667 / 0.741; PIAF, without
               sentences, unchanged): decision 21. p_sentence_every 0 gives the sections-only list.
Any other mode is an error naming it (the list: auto, hybrid, two-stage, bm25, vector); so is
a word of p_expand other than 'parent' and 'cited', and a p_query_model that is not the corpus
model. Parameters: as rag.search's (no defaults
here: rag.search gives them). rag.search adds the expansions on top of these rows; it is a SQL
function the caller's statement inlines, so its plan is cached with the caller's.
Cost: the called function's (one extra PL/pgSQL call); hybrid and two-stage add rag.search_sentences and
the merge (rag._interleave; about 1.1 ms per search on the two books, 3.1 ms at 100k rows:
bench/bench_search.py, migration 0011). Two-stage without book, within or settings, k 1..100 and
a query vector (the default's usual call) runs instead from the corpus model's generated function
(rag._default_search, written by rag._install_model_search, migration 0015, decision 24): the
same rows from statements whose plans are cached, about a third less time on the books (7.0
against 10.5 ms p50 with parent expansion, bench/bench_search.py, migration 0015; 5.56 against
9.03 ms with migration 0020), called statically since migration 0020 (decision 29); the
general functions when it returns nothing.
*/
DECLARE
    v_mode  TEXT := p_mode;    -- the mode run ('auto' resolved)
    v_model TEXT;
    st      RECORD;
    f_rows  rag.search_hit[];  -- the mode's list (hybrid's or two-stage's), best first
    s_rows  rag.search_hit[];  -- the sentence branch's paragraphs, best first
BEGIN
    IF p_mode IS NULL OR p_mode NOT IN ('auto', 'hybrid', 'two-stage', 'bm25', 'vector') THEN
        RAISE EXCEPTION 'mode must be auto, hybrid, two-stage, bm25 or vector, got "%"', p_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_mode = 'auto' THEN
        v_mode := CASE WHEN coalesce(p_levels <@ ARRAY[0], true) AND coalesce(p_node_type, 'source') = 'source'
                       THEN 'two-stage' ELSE 'hybrid' END;
    END IF;
    IF v_mode = 'two-stage' AND (p_levels IS NOT NULL OR p_node_type IS NOT NULL) THEN
        -- it returns paragraphs only: the filters that say so are accepted (and change nothing)
        PERFORM rag._check_search_args(p_query, p_k, p_book, p_levels, p_node_type);
        IF NOT coalesce(p_levels <@ ARRAY[0], true) OR coalesce(p_node_type, 'source') <> 'source' THEN
            RAISE EXCEPTION 'two-stage search ranks paragraphs inside the best sections: it takes no levels filter but {0} and no node_type but source, got levels %, node_type %',
                coalesce(p_levels::text, 'NULL'), coalesce(p_node_type, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
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
    IF v_mode IN ('hybrid', 'two-stage') THEN
        -- The default without filters or settings: rag._default_search, the corpus model's
        -- generated function, runs the same search from statements whose plans are cached
        -- (decision 24), called statically (decision 29); no row from it (no section, or no
        -- paragraph of the kept sections, found; or not generated for this corpus) means the
        -- statements below.
        IF v_mode = 'two-stage' AND p_book IS NULL AND p_within IS NULL AND p_query_embedding IS NOT NULL
           AND p_k BETWEEN 1 AND 100
           AND num_nulls(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight, p_chapter_weight, p_cite_weight,
                         p_sentence_after, p_sentence_every) = 8 THEN
            RETURN QUERY SELECT * FROM rag._default_search(p_query, p_query_embedding, p_k);
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        SELECT * INTO st FROM rag._fusion_settings(p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
                                                   p_chapter_weight, p_cite_weight, p_sentence_after, p_sentence_every);
        -- The mode's own list, best first (the fusion settings above are checked in both modes,
        -- though two-stage does not use chapter_weight and cite_weight).
        IF v_mode = 'hybrid' THEN
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                     p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                     p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                     p_cite_weight => p_cite_weight) b;
        ELSE
            SELECT array_agg(b ORDER BY b.rank) INTO f_rows
            FROM rag.search_two_stage(p_query, p_query_embedding, p_k, p_book, p_within => p_within,
                     p_fusion => p_fusion, p_normalisation => p_normalisation, p_bm25_weight => p_bm25_weight,
                     p_vector_weight => p_vector_weight) b;
            IF f_rows IS NULL AND p_mode = 'auto' THEN
                -- no paragraph of the best sections matches (words found only in summaries, and no
                -- query vector): 'auto' gives the hybrid list, summaries included, rather than nothing
                SELECT array_agg(b ORDER BY b.rank) INTO f_rows
                FROM rag.search_hybrid(p_query, p_query_embedding, p_k, p_book, p_levels, p_node_type,
                         p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                         p_normalisation => p_normalisation, p_chapter_weight => p_chapter_weight, p_within => p_within,
                         p_cite_weight => p_cite_weight) b;
            END IF;
        END IF;
        IF st.sentence_every = 0 OR st.sentence_after >= p_k OR p_query_embedding IS NULL
           OR NOT 0 = ANY(coalesce(p_levels, ARRAY[0])) OR p_node_type = 'summary' THEN
            RETURN QUERY SELECT * FROM unnest(f_rows);
            RETURN;
        END IF;
        -- Merge: the sentence branch's paragraphs into their places (rag._interleave).
        SELECT array_agg(s ORDER BY s.rank) INTO s_rows
        FROM rag.search_sentences(p_query_embedding, least(1000, 2 * p_k), p_book, p_within) s;
        RETURN QUERY SELECT * FROM rag._interleave(f_rows, s_rows, st.sentence_after, st.sentence_every, p_k);
    ELSE
        RETURN QUERY SELECT * FROM rag.search_branch(p_query, p_query_embedding, v_mode, p_k, p_book, p_levels, p_node_type,
                                                     p_within);
    END IF;
END
$$;
