-- rag._paragraph_text: the text of paragraphs first..last of a node, its chunks joined.
CREATE OR REPLACE FUNCTION rag._paragraph_text(
    p_source_file TEXT,
    p_first       INT,
    p_last        INT
) RETURNS TEXT
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
/*
Returns the content of p_source_file's paragraphs p_first..p_last (§N, the numbers the tools
print: hierarchical_content_nodes.paragraph), in reading order, chunks joined by one space (a
long paragraph is several chunks, cut between sentences); NULL when none of them exists.
Cost: one index range scan on (source_file, paragraph).
*/
    SELECT string_agg(n.content, ' ' ORDER BY n.paragraph, n.chunk_index)
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file = p_source_file AND n.paragraph BETWEEN p_first AND p_last;
$$;
