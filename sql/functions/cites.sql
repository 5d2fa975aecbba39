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
