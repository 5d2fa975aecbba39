-- rag._dress: search hits with their cites and the expansions asked for.
CREATE OR REPLACE FUNCTION rag._dress(
    p_hits   rag.search_hit[],
    p_expand TEXT[]
) RETURNS SETOF rag.search_hit
LANGUAGE sql STABLE
AS $$
/*
Returns p_hits in rank order with cites filled (rag.cites: what a summary hit's anchors cite,
the end notes a paragraph calls), parent when p_expand has 'parent' (the parent node's rows, JSON, '[]' without one)
and cited when it has 'cited' (rag.get_citations, JSON); the other columns as given.
Cost: a lookup per hit, per distinct parent ('parent'), per hit ('cited').
*/
    WITH h AS (
        SELECT * FROM unnest(p_hits)
    ), parents AS (  -- each parent node's rows as JSON, built once however many hits share it
        SELECT f.file, (SELECT json_agg(row_to_json(p) ORDER BY p.chunk_index) FROM rag.get_node(f.file) p) AS rows
        FROM (SELECT DISTINCT h.parent_source_file AS file FROM h
              WHERE 'parent' = ANY(p_expand) AND h.parent_source_file IS NOT NULL) f
    )
    SELECT h.id, h.source_file, h.chunk_index, h.level, h.node_type, h.heading_path, h.parent_source_file,
           h.content, h.content_token_count, h.book, h.node_order, h.paragraph, h.score, h.rank, h.bm25_rank,
           h.bm25_score, h.vector_rank, h.vector_score, h.section_score, h.sentence_rank, h.sentence_score,
           rag.cites(h.source_file, h.chunk_index),
           CASE WHEN 'parent' = ANY(p_expand) THEN coalesce(parents.rows, '[]'::json) END,
           CASE WHEN 'cited' = ANY(p_expand) THEN
               (SELECT coalesce(json_agg(row_to_json(g) ORDER BY g.node_order, g.chunk_index), '[]'::json)
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END,
           h.kind
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;
