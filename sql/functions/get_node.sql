-- rag.get_node: all rows of one node (one corpus file), in chunk order.
CREATE OR REPLACE FUNCTION rag.get_node(
    p_source_file TEXT
) RETURNS SETOF rag.node_chunk
LANGUAGE sql STABLE
AS $$
/*
Returns the rows of p_source_file ordered by chunk_index (kind: 'text', or 'author_summary' for the
author's own summary of the section); no rows when the file is not loaded.
Parameters: p_source_file  repo-relative path, e.g. 'corpus/<book>/<part>/<section>/summary.md'.
Cost: one index range scan on (source_file, chunk_index).
*/
    SELECT n.id, n.source_file, n.chunk_index, n.level, n.node_type, n.heading_path,
           n.parent_source_file, n.content, n.content_token_count, n.book, n.node_order, n.paragraph, n.kind
    FROM rag.hierarchical_content_nodes n
    WHERE n.source_file = p_source_file
    ORDER BY n.chunk_index;
$$;
