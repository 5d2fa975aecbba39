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
SET search_path = pg_catalog, public
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
