-- rag.search_two_stage: find the best sections by their summaries and paragraphs, then the best paragraphs inside them.
CREATE OR REPLACE FUNCTION rag.search_two_stage(
    p_query           TEXT,
    p_query_embedding vector,
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_sections        INT DEFAULT 5,
    p_section_weight  FLOAT8 DEFAULT 0.3,
    p_pool            INT DEFAULT 100,
    p_within          TEXT DEFAULT NULL,
    p_fusion          TEXT DEFAULT NULL,
    p_normalisation   TEXT DEFAULT NULL,
    p_bm25_weight     FLOAT8 DEFAULT NULL,
    p_vector_weight   FLOAT8 DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2):
  1. rag.search_hybrid over the level-1 summaries (chapters and front matter) and the level-0
     paragraphs together; each section (a summary's own file, a paragraph's parent) gets the
     best fused score of its rows among them, so a section is found by its summary's words or
     by its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best). Until migration 0012 stage 1 read the summaries
     alone. Measured on the tuning halves with the sentence branch merged by rag.search
     (recall@5 / MRR@10; decision 21): PIAF, whose "summaries" are articles' leads, 0.775 /
     0.677 -> 0.908 / 0.804; Bastiat 0.524 / 0.846 -> 0.571 / 0.881; Tocqueville 0.667 / 0.780
     -> 0.667 / 0.741 (MRR@10 lower); the mean over the three sets 0.7114 -> 0.7620.
  2. rag.search_hybrid over the level-0 paragraphs whose parent is one of those sections;
     paragraph scores min-max normalised over the candidates.
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best, with the stage-2
  branch ranks and section_score.
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept after stage 1, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           candidates per branch in each stage (default 100); stage 1 reads
                   greatest(p_pool, 10 x p_sections) rows of levels 0-1, stage 2 greatest(p_k, p_pool)
                   paragraphs.
  p_within         NULL or a source_file: both stages stay inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   (NULL = rag._fusion_settings()); its chapter term is not used here (stage 1
                   already ranks the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), stage 1 is empty and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: two hybrid statements, each reading its 100 best rows (content included); about three
times rag.search_hybrid on the books (17 ms against 5.7 ms p50 from Python, 20 queries).
*/
DECLARE
    v_files  TEXT[];
    v_scores FLOAT8[];
BEGIN
    PERFORM rag._check_search_args(p_query, p_k, p_book, NULL, NULL);
    IF p_sections IS NULL OR p_sections < 1 OR p_sections > 100 THEN
        RAISE EXCEPTION 'sections must be between 1 and 100, got %', coalesce(p_sections::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_section_weight IS NULL OR p_section_weight < 0 OR p_section_weight > 1 THEN
        RAISE EXCEPTION 'section_weight must be within 0..1, got %', coalesce(p_section_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score
                  FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_pool, p_sections * 10)),
                                         p_book => p_book, p_levels => ARRAY[0, 1], p_pool => p_pool,
                                         p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                         p_fusion => p_fusion, p_normalisation => p_normalisation,
                                         p_chapter_weight => 0, p_within => p_within) h) h
            WHERE h.section IS NOT NULL
            GROUP BY h.section
            ORDER BY best DESC, h.section
            LIMIT p_sections
        ) t
    ) s;

    IF v_files IS NULL THEN
        RAISE NOTICE 'no section matches (no summary, and no paragraph with a parent); falling back to a flat hybrid search over paragraphs';
        RETURN QUERY SELECT * FROM rag.search_hybrid(p_query, p_query_embedding, p_k => p_k,
                                                      p_book => p_book, p_levels => ARRAY[0], p_pool => p_pool,
                                                      p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                                                      p_fusion => p_fusion, p_normalisation => p_normalisation,
                                                      p_chapter_weight => 0, p_within => p_within);
        RETURN;
    END IF;

    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_k, p_pool)),
                               p_book => p_book, p_levels => ARRAY[0], p_parent_files => v_files,
                               p_pool => p_pool, p_bm25_weight => p_bm25_weight, p_vector_weight => p_vector_weight,
                               p_fusion => p_fusion, p_normalisation => p_normalisation,
                               p_chapter_weight => 0, p_within => p_within) h
    ), scored AS (
        SELECT p.*, (1 - p_section_weight) * p.norm + p_section_weight * s.sc AS final, s.sc AS ssc
        FROM para p JOIN sec s ON s.f = p.parent_source_file
    )
    SELECT x.id, x.source_file, x.chunk_index, x.level, x.node_type, x.heading_path,
           x.parent_source_file, x.content, x.content_token_count, x.book, x.node_order, x.paragraph,
           x.final, (row_number() OVER (ORDER BY x.final DESC, x.rank, x.id))::int,
           x.bm25_rank, x.bm25_score, x.vector_rank, x.vector_score, x.ssc, NULL::int, NULL::float8,
           NULL::json, NULL::json, NULL::json
    FROM scored x
    ORDER BY x.final DESC, x.rank, x.id
    LIMIT p_k;
END
$$;
