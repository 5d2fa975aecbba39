-- rag.get_parent: parent expansion: all rows of a node's parent, in chunk order.
CREATE OR REPLACE FUNCTION rag.get_parent(
    p_source_file TEXT
) RETURNS SETOF rag.node_chunk
LANGUAGE sql STABLE
AS $$
/*
Given a hit's source_file (any of its rows), returns every row of the parent node
(the rows whose source_file is the hit's parent_source_file) ordered by chunk_index:
for a paragraph, its section summary; for a section summary, its part's; and so on.
Returns nothing for a root (parent_source_file NULL) or an unknown file.
Cost: two index lookups; < 0.2 ms.
*/
    SELECT p.*
    FROM (SELECT n.parent_source_file FROM rag.hierarchical_content_nodes n
          WHERE n.source_file = p_source_file LIMIT 1) h
    CROSS JOIN LATERAL rag.get_node(h.parent_source_file) p;
$$;
