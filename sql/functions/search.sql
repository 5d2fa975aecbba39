-- rag.search: the search, in every mode, with each hit's cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag.search(
    p_query           TEXT,
    p_query_embedding vector DEFAULT NULL,
    p_mode            TEXT DEFAULT 'auto',
    p_k               INT DEFAULT 10,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_within          TEXT DEFAULT NULL,
    p_expand          TEXT[] DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL,
    p_tuning          JSONB DEFAULT NULL
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Returns the p_k best hits for p_query, best first (rag.search_hit: rank 1..k, score, each
branch's rank and score, section_score, sentence_rank and sentence_score where they apply).
  p_query_embedding its vector from the corpus model, query role (`bookrag embed`); NULL: BM25 alone
  p_mode            'auto' (default: 'two-stage' for paragraphs, 'hybrid' when p_levels asks for
                    summaries or two-stage finds nothing), 'two-stage', 'hybrid', 'bm25', 'vector'
  p_k               1..1000 (default 10); p_book one loaded book; p_levels some of 0..3;
                    p_within a source_file: only its subtree
  p_expand          'parent' fills parent, 'cited' fills cited (JSON); cites is always filled
  p_query_model     the vector's model: refused when not the corpus model
  p_tuning          named settings for measurement, e.g. '{"sections": 7}' (rag._settings)
Raises invalid_parameter_value naming the bad value (rag._search_hits).
Cost: the mode's scans, plus a lookup per summary hit (cites), per distinct parent ('parent'),
per hit ('cited'). A SQL function: inlined into the caller's statement.
*/
    WITH h AS MATERIALIZED (
        SELECT * FROM rag._search_hits(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_within,
                                       p_expand, p_query_model, p_tuning)
    ), parents AS (  -- each parent node's rows as JSON, built once however many hits share it
        SELECT f.file, (SELECT json_agg(row_to_json(p) ORDER BY p.chunk_index) FROM rag.get_node(f.file) p) AS rows
        FROM (SELECT DISTINCT h.parent_source_file AS file FROM h
              WHERE 'parent' = ANY(p_expand) AND h.parent_source_file IS NOT NULL) f
    )
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           CASE WHEN h.level = 0 THEN '[]'::json ELSE rag.cites(h.source_file, h.chunk_index) END,
           CASE WHEN 'parent' = ANY(p_expand) THEN coalesce(parents.rows, '[]'::json) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;
