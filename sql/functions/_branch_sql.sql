-- SQL text of one retrieval branch (BM25 or kNN), shared by search_branch and search_hybrid.
CREATE OR REPLACE FUNCTION rag._branch_sql(
    p_branch       TEXT,
    p_model        TEXT,
    p_dimension    INT,
    p_book         TEXT,
    p_levels       INT[],
    p_node_type    TEXT,
    p_parent_files TEXT[],
    p_within_ids   INT[]
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
AS $$
/*
Returns a SELECT yielding (id, s, r, lvl, nt, sf, pf): row id, branch score, 1-based branch
rank, and the row's level, node_type, source_file and parent_source_file (read from the heap
tuple the scan visits anyway, for the fusion's chapter term), for at most $7 rows (the
candidate pool). Placeholders: $1 query text, $2 query embedding, $3 book, $4 levels,
$5 node_type, $6 parent files, $7 pool size, $8 the ids of the `within` subtree
(rag._subtree_ids). The filters that are set, and only those, become ' AND ...' conditions
identical in both branches, so pg_search pushes each one into its index scan and the kNN
branch filters the same rows.
  'bm25'   : pg_search match of any query term (|||) on content, scored by pdb.score; the
             query is tokenized by the index's tokenizer (French stemmer, folding), never
             parsed, so operators and quotes are plain characters.
  'vector' : cosine kNN on embedding::vector(p_dimension) restricted to rows of p_model, the
             expression and predicate of that model's partial HNSW index; s = 1 - distance.
             When p_model is NULL (no vectors loaded) the branch is empty.
The model name and dimension are formatted as literal/number (%L, %s); values go through USING.
*/
DECLARE
    v_filters TEXT := concat(
        CASE WHEN p_book IS NOT NULL THEN ' AND n.book = $3' END,
        CASE WHEN p_levels IS NOT NULL THEN ' AND n.level = ANY($4)' END,
        CASE WHEN p_node_type IS NOT NULL THEN ' AND n.node_type = $5' END,
        CASE WHEN p_parent_files IS NOT NULL THEN ' AND n.parent_source_file = ANY($6)' END,
        CASE WHEN p_within_ids IS NOT NULL THEN ' AND n.id = ANY($8)' END);
BEGIN
    IF p_branch = 'bm25' THEN
        RETURN format(
            'SELECT x.id, x.s, row_number() OVER (ORDER BY x.s DESC, x.id)::int AS r, x.lvl, x.nt, x.sf, x.pf FROM ('
            'SELECT n.id, pdb.score(n.id)::float8 AS s, n.level AS lvl, n.node_type AS nt, n.source_file AS sf, '
            'n.parent_source_file AS pf FROM rag.hierarchical_content_nodes n '
            'WHERE n.content ||| $1%s ORDER BY pdb.score(n.id) DESC LIMIT $7) x', v_filters);
    ELSIF p_branch = 'vector' THEN
        IF p_model IS NULL THEN
            RETURN 'SELECT NULL::int AS id, NULL::float8 AS s, NULL::int AS r, NULL::int AS lvl, NULL::text AS nt, '
                   'NULL::text AS sf, NULL::text AS pf WHERE false';
        END IF;
        RETURN format(
            'SELECT y.id, 1 - y.d AS s, row_number() OVER (ORDER BY y.d, y.id)::int AS r, y.lvl, y.nt, y.sf, y.pf FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d, n.level AS lvl, '
            'n.node_type AS nt, n.source_file AS sf, n.parent_source_file AS pf '
            'FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL%3$s '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $7) y',
            p_dimension, p_model, v_filters);
    END IF;
    RAISE EXCEPTION 'unknown branch "%"', p_branch USING ERRCODE = 'invalid_parameter_value';
END
$$;
