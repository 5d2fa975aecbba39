-- rag._settings: the tuning of a search (names, defaults and bounds, defined here only).
CREATE OR REPLACE FUNCTION rag._settings(
    p_tuning JSONB DEFAULT NULL
) RETURNS rag.search_settings
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the settings a search runs with: the defaults, overridden by the named values of
p_tuning (rag.search's p_tuning, for the evaluation scripts; NULL or '{}' = the defaults).
`SELECT * FROM rag._settings()` shows them.
  fusion          'convex' (default: a weighted sum of each branch's normalised scores) or 'rrf'
  normalisation   'zscore' (default) or 'minmax': how 'convex' normalises a branch's scores
  bm25_weight, vector_weight   0.5 and 0.5; finite, >= 0, not both 0
  rrf_k           60; >= 1 ('rrf' only)
  chapter_weight  0.4; 0..1: share of a paragraph's score taken from its chapter (hybrid)
  hybrid_pool     40; 1..1000: candidates of each branch in hybrid (at least k)
  sections        5; 1..100: sections two-stage keeps
  section_weight  0.3; 0..1: share of a paragraph's score taken from its section (two-stage)
  pool            100; 1..1000: BM25 candidates of two-stage's first search (at least k and
                  10 x sections), and both branches' in its search inside the sections
  vector_pool     40; 1..1000: kNN candidates of two-stage's first search (its ef_search)
  sentence_after, sentence_every   1 and 3; 0..1000: the sentence branch's places in a hybrid
                  or two-stage list (rag._interleave); sentence_every 0 = no sentence branch
Raises invalid_parameter_value (22023) naming the setting: an unknown name, a value of the
wrong type, a value out of bounds.
Cost: microseconds.
*/
DECLARE
    s      rag.search_settings := ROW('convex', 'zscore', 0.5, 0.5, 60, 0.4, 40, 5, 0.3, 100, 40, 1, 3);
    v_bad  TEXT;
BEGIN
    IF p_tuning IS NULL OR p_tuning = '{}' THEN
        RETURN s;
    END IF;
    IF jsonb_typeof(p_tuning) <> 'object' THEN
        RAISE EXCEPTION 'tuning must be a JSON object of named settings, got %', p_tuning
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT string_agg(format('"%s"', k), ', ' ORDER BY k) INTO v_bad
    FROM jsonb_object_keys(p_tuning) k
    WHERE k NOT IN (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'unknown tuning setting %; the settings are %', v_bad,
            (SELECT string_agg(a.attname, ', ' ORDER BY a.attnum) FROM pg_attribute a
             WHERE a.attrelid = 'rag.search_settings'::regclass AND a.attnum > 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        s := jsonb_populate_record(s, p_tuning);
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION 'tuning %: %', p_tuning, SQLERRM USING ERRCODE = 'invalid_parameter_value';
    END;
    IF s.fusion IS NULL OR s.fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got "%"', s.fusion USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.normalisation IS NULL OR s.normalisation NOT IN ('minmax', 'zscore') THEN
        RAISE EXCEPTION 'normalisation must be ''minmax'' or ''zscore'', got "%"', s.normalisation
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.bm25_weight >= 0 AND s.bm25_weight < 'Infinity' AND s.vector_weight >= 0
                    AND s.vector_weight < 'Infinity', false) THEN
        RAISE EXCEPTION 'branch weights must be finite and >= 0, got bm25 % and vector %', s.bm25_weight, s.vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF s.bm25_weight = 0 AND s.vector_weight = 0 THEN
        RAISE EXCEPTION 'branch weights are both 0: give at least one branch a positive weight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.rrf_k >= 1, false) THEN
        RAISE EXCEPTION 'rrf_k must be >= 1, got %', s.rrf_k USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.chapter_weight BETWEEN 0 AND 1 AND s.section_weight BETWEEN 0 AND 1, false) THEN
        RAISE EXCEPTION 'chapter_weight and section_weight must be within 0..1, got % and %', s.chapter_weight,
            s.section_weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sections BETWEEN 1 AND 100, false) THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', s.sections USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.hybrid_pool BETWEEN 1 AND 1000 AND s.pool BETWEEN 1 AND 1000 AND s.vector_pool BETWEEN 1 AND 1000, false) THEN
        RAISE EXCEPTION 'hybrid_pool, pool and vector_pool must be between 1 and 1000, got %, % and %', s.hybrid_pool,
            s.pool, s.vector_pool USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT coalesce(s.sentence_after BETWEEN 0 AND 1000 AND s.sentence_every BETWEEN 0 AND 1000, false) THEN
        RAISE EXCEPTION 'sentence_after and sentence_every must be within 0..1000, got % and %',
            s.sentence_after, s.sentence_every USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN s;
END
$$;
