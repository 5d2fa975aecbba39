-- The WHERE fragment for the shared filters, identical for the BM25 and the kNN branch.
CREATE OR REPLACE FUNCTION rag._filter_sql(
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[],
    p_within_ids   INT[]
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns ' AND ...' conditions on alias n, referencing the values only through the
placeholders every search statement binds in the same order:
  $3 book, $4 levels, $5 node_type, $6 parent files, $8 the ids of the `within` subtree
(rag._subtree_ids; $7 is the pool size).
Only the filters that are set appear, so pg_search can push each one into its index scan
and the kNN branch filters the same rows. Cost: string concatenation only.
*/
    SELECT concat(
        CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $3' END,
        CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($4)' END,
        CASE WHEN p_node_type IS NOT NULL THEN ' AND n.node_type = $5' END,
        CASE WHEN p_parent_files IS NOT NULL THEN ' AND n.parent_source_file = ANY($6)' END,
        CASE WHEN p_within_ids IS NOT NULL THEN ' AND n.id = ANY($8)' END
    );
$$;
