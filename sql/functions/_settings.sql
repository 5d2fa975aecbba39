-- rag._settings: the tuning of a search (names, defaults and bounds, defined here only).
CREATE OR REPLACE FUNCTION rag._settings(
    p_tuning JSONB DEFAULT NULL
) RETURNS rag.search_settings
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the settings a search runs with: the defaults, overridden by p_tuning's named values
(NULL or '{}' = the defaults; `SELECT * FROM rag._settings()` shows them).
  fusion 'convex' | 'rrf'; normalisation 'zscore' | 'minmax'   (rag._fuse)
  bm25_weight, vector_weight 0.5, 0.5 (finite, >= 0, not both 0); rrf_k 60 (>= 1)
  chapter_weight 0.4 (0..1), hybrid_pool 40 (1..1000)            (rag._hybrid)
  sections 5 (1..100), section_weight 0.3 (0..1), pool 100, vector_pool 40 (1..1000) (rag._two_stage)
  sentence_after 1, sentence_every 3 (0..1000; every 0 = off)    (rag._interleave)
Raises invalid_parameter_value naming the setting: unknown, of the wrong type, out of bounds.
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
