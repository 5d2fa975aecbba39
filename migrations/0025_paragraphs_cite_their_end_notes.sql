-- 0025_paragraphs_cite_their_end_notes: issue 36: a paragraph that calls an end note cites it (rag.cites, rag.get_citations and rag._dress read rag.citations for level-0 rows too)
-- depends: 0024_dress_once

-- function: _dress sha256:e397f9af7aee6c4dd05c5dc7be7dec2c2f5955f79ed7ae391bde205f1d9d80c0
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
                FROM rag.get_citations(h.source_file, h.chunk_index) g) END
    FROM h LEFT JOIN parents ON parents.file = h.parent_source_file
    ORDER BY h.rank;
$$;

-- function: cites sha256:27764444c0befae88d97d21ee7fab1c7c256c59f1454c050375c60f740251b5a
-- rag.cites: what one chunk cites (a summary's anchors, a paragraph's end-note calls), as JSON.
CREATE OR REPLACE FUNCTION rag.cites(
    p_source_file TEXT,
    p_chunk_index INT
) RETURNS JSON
LANGUAGE sql STABLE
AS $$
/*
Returns [{source_file, paragraphs}] for the chunk (p_source_file, p_chunk_index), one object per
cited file in path order: a chapter summary's chunk cites paragraphs of its section's source.md
(paragraphs sorted, [§12–14] expanded), a part or book summary's chunk cites child summaries
whole (paragraphs null), a source paragraph the end notes it calls, "(_A_)", whole (paragraphs
null). '[]' for a chunk that cites nothing. rag.search fills its `cites` column with it; the MCP
get_node tool shows it per chunk. Rows themselves:
rag.get_citations. A SQL function the caller's statement inlines.
Cost: one index scan of rag.citations (its primary key order) per call.
*/
    SELECT coalesce((
        SELECT json_agg(json_build_object('source_file', c.f, 'paragraphs', c.p) ORDER BY c.f)
        FROM (SELECT ct.cited_source_file AS f,
                     array_agg(ct.cited_paragraph ORDER BY ct.cited_paragraph)
                         FILTER (WHERE ct.cited_paragraph IS NOT NULL) AS p
              FROM rag.citations ct
              WHERE ct.source_file = p_source_file AND ct.chunk_index = p_chunk_index
              GROUP BY ct.cited_source_file) c), '[]'::json);
$$;

-- function: get_citations sha256:6559a0853431298a8fa0a2efb903c108196272e5e8ea309d02e132f9d446389a
-- rag.get_citations: what a chunk cites: a summary's paragraphs, a paragraph's end notes.
CREATE OR REPLACE FUNCTION rag.get_citations(
    p_source_file TEXT,
    p_chunk_index INT DEFAULT NULL
) RETURNS TABLE (
    citing_chunk_index  INT,
    id                  INT,
    source_file         TEXT,
    chunk_index         INT,
    paragraph           INT,
    level               INT,
    node_type           TEXT,
    heading_path        TEXT,
    parent_source_file  TEXT,
    content             TEXT,
    content_token_count INT,
    book                TEXT,
    node_order          INT
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the rows cited by the anchors ([§12–14], docs/anchors.md) of one summary chunk, or of
every chunk of the summary when p_chunk_index is NULL: for a chapter summary, the chunks of the
cited paragraphs of its source.md (every chunk of a paragraph split in several); for a part or
book summary, every row of each cited child summary; for a paragraph (level 0) that calls end
notes, every row of each note. Ordered by citing chunk, then reading
order; a row cited twice by one chunk appears once. citing_chunk_index says which chunk of
p_source_file cites the row.
Parameters:
  p_source_file  the citing node (a summary, or a source.md). Required; unknown -> error.
  p_chunk_index  one chunk of it, 0..chunk_count-1, or NULL for all (default).
Edge cases: a summary without anchors, a paragraph calling no note -> no rows.
Cost: index lookups on rag.citations and (source_file, paragraph); < 1 ms for a chapter.
*/
DECLARE
    v_chunks INT;
BEGIN
    SELECT count(*) INTO v_chunks FROM rag.hierarchical_content_nodes n WHERE n.source_file = p_source_file;
    IF v_chunks = 0 THEN
        RAISE EXCEPTION 'no node "%"; use a source_file from a search hit or the outline', p_source_file
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_chunk_index IS NOT NULL AND (p_chunk_index < 0 OR p_chunk_index >= v_chunks) THEN
        RAISE EXCEPTION 'chunk_index must be between 0 and % for %, got %', v_chunks - 1, p_source_file, p_chunk_index
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT DISTINCT ON (c.chunk_index, n.node_order, n.chunk_index)
           c.chunk_index, n.id, n.source_file, n.chunk_index, n.paragraph, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order
    FROM rag.citations c
    JOIN rag.hierarchical_content_nodes n
      ON n.source_file = c.cited_source_file AND (c.cited_paragraph IS NULL OR n.paragraph = c.cited_paragraph)
    WHERE c.source_file = p_source_file AND (p_chunk_index IS NULL OR c.chunk_index = p_chunk_index)
    ORDER BY c.chunk_index, n.node_order, n.chunk_index;
END
$$;

REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;  -- PUBLIC's default on new functions

INSERT INTO rag.function_versions (name, sha256, migration) VALUES
    ('_dress', 'e397f9af7aee6c4dd05c5dc7be7dec2c2f5955f79ed7ae391bde205f1d9d80c0', '0025_paragraphs_cite_their_end_notes'),
    ('cites', '27764444c0befae88d97d21ee7fab1c7c256c59f1454c050375c60f740251b5a', '0025_paragraphs_cite_their_end_notes'),
    ('get_citations', '6559a0853431298a8fa0a2efb903c108196272e5e8ea309d02e132f9d446389a', '0025_paragraphs_cite_their_end_notes')
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, migration = EXCLUDED.migration, applied_at = now();
