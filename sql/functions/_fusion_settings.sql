-- The fusion settings of a hybrid search: the defaults and the bounds, defined here only.
CREATE OR REPLACE FUNCTION rag._fusion_settings(
    p_fusion         TEXT,
    p_normalisation  TEXT,
    p_bm25_weight    FLOAT8,
    p_vector_weight  FLOAT8,
    p_chapter_weight FLOAT8,
    p_cite_weight    FLOAT8 DEFAULT NULL,
    p_sentence_after INT DEFAULT NULL,
    p_sentence_every INT DEFAULT NULL,
    OUT fusion         TEXT,
    OUT normalisation  TEXT,
    OUT bm25_weight    FLOAT8,
    OUT vector_weight  FLOAT8,
    OUT chapter_weight FLOAT8,
    OUT cite_weight    FLOAT8,
    OUT sentence_after INT,
    OUT sentence_every INT
)
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns the settings a hybrid search runs with: each argument, or its default when NULL, after
checking it. Every function built on rag.search_hybrid (rag.search_two_stage, rag.search)
takes these parameters with DEFAULT NULL and passes them on, so the defaults live here only
(rag.build_context runs them; rag.pack_context over rag.search passes others); `SELECT * FROM rag._fusion_settings(NULL, NULL, NULL, NULL, NULL)`
shows them. Chosen by measurement (evaluation/tune_fusion.py: tuned on one half of each
evalset, checked on the other; docs/decisions/0011-score-fusion.md):
  fusion         'convex' (default): a weighted sum of each branch's per-query normalised
                 scores; 'rrf': Reciprocal Rank Fusion (the default before issue 10).
  normalisation  'zscore' (default) or 'minmax': how 'convex' normalises a branch's scores
                 (a branch's lone candidate gets 1 under both: the top of the min-max scale,
                 but below the 2-3 a pool's best z-score reaches; see the decision record).
  bm25_weight, vector_weight   relative weights of the branches (default 0.5 and 0.5); each
                 finite and >= 0, not both 0.
  chapter_weight share of a paragraph's score taken from its chapter summary's fused score,
                 within 0..1 (default 0.4).
  cite_weight    share of a paragraph's score taken from the best candidate summary chunk whose
                 anchors cite it (docs/anchors.md), within 0..1, chapter_weight + cite_weight
                 at most 1 (default 0: measured, see README).
  sentence_after, sentence_every   the sentence branch's places in a hybrid or two-stage list
                 (rag.search_sentences: paragraphs found through the chapter-summary sentences
                 that cite them, docs/anchors.md): the first sentence_after hits are the fused
                 list's, then one place in every sentence_every goes to the sentence branch's
                 next paragraph not placed yet (with the defaults, 1 and 3: places 2, 5, 8), so
                 a paragraph both lists hold takes the better of its two places (rag._search_hits).
                 Both within 0..1000; sentence_every 0 = no sentence branch.
Bad values raise invalid_parameter_value (22023) naming the value; Python, the CLI and the MCP
server pass values through and show this message.
Cost: a few comparisons.
*/
BEGIN
    fusion         := coalesce(p_fusion, 'convex');
    normalisation  := coalesce(p_normalisation, 'zscore');
    bm25_weight    := coalesce(p_bm25_weight, 0.5);
    vector_weight  := coalesce(p_vector_weight, 0.5);
    chapter_weight := coalesce(p_chapter_weight, 0.4);
    cite_weight    := coalesce(p_cite_weight, 0);
    sentence_after := coalesce(p_sentence_after, 1);
    sentence_every := coalesce(p_sentence_every, 3);
    IF fusion NOT IN ('rrf', 'convex') THEN
        RAISE EXCEPTION 'fusion must be ''rrf'' or ''convex'', got "%"', fusion
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF normalisation NOT IN ('minmax', 'zscore') THEN
        RAISE EXCEPTION 'normalisation must be ''minmax'' or ''zscore'', got "%"', normalisation
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT (bm25_weight >= 0 AND bm25_weight < 'Infinity' AND vector_weight >= 0 AND vector_weight < 'Infinity') THEN
        RAISE EXCEPTION 'branch weights must be finite and >= 0, got bm25 % and vector %', bm25_weight, vector_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF bm25_weight = 0 AND vector_weight = 0 THEN
        RAISE EXCEPTION 'branch weights are both 0: give at least one branch a positive weight'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT chapter_weight BETWEEN 0 AND 1 THEN
        RAISE EXCEPTION 'chapter_weight must be within 0..1, got %', chapter_weight
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT cite_weight BETWEEN 0 AND 1 OR chapter_weight + cite_weight > 1 THEN
        RAISE EXCEPTION 'cite_weight must be within 0..1 and chapter_weight + cite_weight at most 1, got % and %',
            cite_weight, chapter_weight USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT sentence_after BETWEEN 0 AND 1000 OR NOT sentence_every BETWEEN 0 AND 1000 THEN
        RAISE EXCEPTION 'sentence_after and sentence_every must be within 0..1000, got % and %',
            sentence_after, sentence_every USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
