-- rag.search_two_stage: the best sections by their summaries and paragraphs, then their best paragraphs, from one hybrid search.
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
    p_vector_weight   FLOAT8 DEFAULT NULL,
    p_vector_pool     INT DEFAULT 40
) RETURNS SETOF rag.search_hit
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
/*
Two-stage retrieval (seeds/two-stage-search, section 4.2), both stages over one hybrid search:
  rag.search_hybrid over every level (k = greatest(p_pool, p_k, 10 x p_sections) rows, the
  BM25 branch's pool raised to that k by rag.search_hybrid, the kNN branch's p_vector_pool; no
  chapter term); rows of levels 2-3 (parts, the book) are left out.
  1. Sections: each section (a level-1 summary's own file, a paragraph's parent) gets the best
     fused score of its rows among those, so a section is found by its summary's words or by
     its own text; the p_sections best are kept, their scores min-max normalised over them
     (section_score in 0..1, 1 for the best).
  2. Paragraphs: the level-0 rows among those whose parent is a kept section, their fused
     scores min-max normalised over them; when they are fewer than p_k, a second search over
     the kept sections' paragraphs (k and pool greatest(p_pool, p_k)) gives them instead:
     rag._search_in_sections, whose BM25 branch is the BM25 rows among those read (no second
     pg_search query since migration 0019, decision 28; without a query vector, pg_search's
     top rows inside the sections, as before) and whose kNN branch reads the sections'
     paragraphs exactly, within p_within's subtree when given. A section kept for
     its summary's score contributes only those of its paragraphs that are among the rows read
     (and, when the second search runs, its nearest paragraphs).
  score = (1 - p_section_weight) * paragraph score + p_section_weight * section_score,
  so a paragraph is boosted by its section's score. Returns the p_k best (fewer only when fewer
  of the kept sections' paragraphs match), with their branch ranks and section_score.
  Until migration 0013 stage 2 always ran that second search (and until 0012 stage 1 read the
  summaries alone); reading the first search's rows gives the same quality within one question
  of the smallest tuning half at about half the cost (decision 22; recall@5 / MRR@10 with the
  sentence branch merged by rag.search, tuning halves: Bastiat 0.619 / 0.881 both, Tocqueville
  0.667 / 0.741 -> 0.651 / 0.742, PIAF 0.908 / 0.804 -> 0.912 / 0.808; mean of the held-out
  halves 0.688 -> 0.690).
Parameters:
  p_query, p_query_embedding  as in rag.search_hybrid (embedding may be NULL: BM25 only).
  p_k              rows returned, 1..1000 (default 10).
  p_book           NULL or one book.
  p_sections       sections kept, 1..100 (default 5).
  p_section_weight 0..1 (default 0.3, the seed's value).
  p_pool           BM25 candidates of the first search, at least (default 100), and both
                   branches' in the second search and in the flat fallback (below); rows read
                   as said above (at most 1000).
  p_vector_pool    kNN candidates of the first search, and its ef_search (at least 40),
                   1..1000 (default 40; NULL: as BM25's).
                   Until migration 0017 it read 100, like BM25: 40 gives the same quality
                   within one question (tuning halves, mean of recall@5 and MRR@10 over the
                   three sets 0.768 -> 0.764, held-out 0.683 -> 0.683) in less time, since
                   the HNSW scan's cost follows its ef_search (decision 26).
  p_within         NULL or a source_file: only rows inside its subtree.
  p_fusion, p_normalisation, p_bm25_weight, p_vector_weight: passed to rag.search_hybrid
                   and rag._search_in_sections (NULL = rag._fusion_settings()); the chapter
                   term is not used here (the sections already rank the chapters).
Edge case: when no row of levels 0-1 matches, or none has a parent (a corpus without
summaries), no section is found and the function falls back to a flat hybrid search over
paragraphs (NOTICE).
Cost: one rag.search_hybrid reading its greatest(p_pool, p_k, 10 x p_sections) best rows (100
by default, content included), then two small statements over them in memory; a second
search when the first holds fewer than p_k of the kept sections' paragraphs (k 10, each
question within its book: 6 of the books' 177 evalset questions and 83 of an evenly spread 500
of PIAF's 3,835, whose articles have about 4 paragraphs each, with the kNN top 40; 5 and 56 with
the top 100 until migration 0017; almost every query at 100k synthetic rows). With parent expansion
through rag.search, 1.3 times hybrid's time on the books in migration 0014's run of
bench/bench_search.py ("default+parent, general" against "hybrid+parent" since 0015, whose
generated function runs the plain default call: rag._install_model_search); with its second
search from static statements (0016), 2.01-2.04 times bm25 + vector at 100k rows where it was
2.22-2.25 (alternate runs, decision 25). The second search reads no text index since migration
0019 (decision 28).
*/
DECLARE
    v_short  BOOLEAN;          -- fewer than p_k of the kept sections' paragraphs among the rows read
    v_rows   rag.search_hit[];
    v_files  TEXT[];
    v_scores FLOAT8[];
    b_ids    INT[];            -- the second search's BM25 rows
    b_scores FLOAT8[];
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

    -- The one search both stages read (every level: a levels filter costs the BM25 scan more
    -- than the few part and book rows it would keep out).
    SELECT array_agg(h ORDER BY h.rank) INTO v_rows
    FROM rag.search_hybrid(p_query, p_query_embedding, p_k => least(1000, greatest(p_pool, p_k, p_sections * 10)),
                           p_book => p_book, p_pool => p_pool, p_bm25_weight => p_bm25_weight,
                           p_vector_weight => p_vector_weight, p_fusion => p_fusion,
                           p_normalisation => p_normalisation, p_chapter_weight => 0, p_within => p_within,
                           p_vector_pool => p_vector_pool) h;

    -- Stage 1: the sections, best first, and their normalised scores.
    SELECT array_agg(s.source_file ORDER BY s.best DESC, s.source_file),
           array_agg(s.norm ORDER BY s.best DESC, s.source_file)
    INTO v_files, v_scores
    FROM (
        SELECT t.source_file, t.best,
               coalesce((t.best - min(t.best) OVER ()) / nullif(max(t.best) OVER () - min(t.best) OVER (), 0), 1) AS norm
        FROM (
            SELECT h.section AS source_file, max(h.score) AS best
            FROM (SELECT CASE WHEN h.level = 1 THEN h.source_file ELSE h.parent_source_file END AS section, h.score
                  FROM unnest(v_rows) h WHERE h.level <= 1) h
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

    -- Stage 2: the kept sections' paragraphs among the same rows; when those rows hold fewer
    -- than p_k of them, a search inside the kept sections (stage 2 until migration 0013), so a
    -- list is never shorter than the sections allow.
    v_short := (SELECT count(*) FROM unnest(v_rows) h WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)) < p_k;
    IF v_short THEN
        -- its BM25 rows: the kept sections' paragraphs among the first search's rows (migration
        -- 0019, decision 28); without a vector it reads pg_search inside the sections instead
        SELECT array_agg(h.id ORDER BY h.rank), array_agg(h.bm25_score ORDER BY h.rank) INTO b_ids, b_scores
        FROM unnest(v_rows) h
        WHERE h.bm25_score IS NOT NULL AND h.level = 0 AND h.parent_source_file = ANY(v_files);
        RETURN QUERY SELECT * FROM rag._search_in_sections(
            p_query, p_query_embedding, (SELECT m.model FROM rag._corpus_model(p_query_embedding) m), v_files, v_scores,
            b_ids, b_scores, p_k, p_pool, p_section_weight, p_fusion, p_normalisation, p_bm25_weight, p_vector_weight,
            p_within);
        RETURN;
    END IF;
    RETURN QUERY
    WITH sec AS (
        SELECT f, sc FROM unnest(v_files, v_scores) AS u(f, sc)
    ), para AS (
        SELECT h.*, coalesce((h.score - min(h.score) OVER ()) / nullif(max(h.score) OVER () - min(h.score) OVER (), 0), 1) AS norm
        FROM unnest(v_rows) h
        WHERE h.level = 0 AND h.parent_source_file = ANY(v_files)
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
