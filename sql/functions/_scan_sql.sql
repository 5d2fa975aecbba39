-- rag._scan_sql: the text of a kNN scan over one model's HNSW index (rag._knn, rag._knn_sentences).
CREATE OR REPLACE FUNCTION rag._scan_sql(
    p_scan      TEXT,
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the SELECT of one kNN scan for p_model of p_dimension, both as literals (the partial
HNSW index's expression and predicate, which a parameter cannot match):
  'nodes'      rag.candidate rows: $3 nearest to $2; $1 the expected model (else no row),
               $4 book, $5 levels, $6 ids, each NULL for none
  'sentences'  (cited file, cited paragraphs, distance) of the $3 sentences nearest to $2; $4 book
Raises invalid_parameter_value for another scan, a model with a $, a dimension out of 1..2000.
*/
BEGIN
    IF strpos(p_model, '$') > 0 OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model "%" (dimension %) cannot be written into a scan: no $ in its name, dimension 1..2000',
            p_model, p_dimension USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scan = 'nodes' THEN
        RETURN format(
            'SELECT y.id, 1 - y.d, (row_number() OVER (ORDER BY y.d, y.id))::int, y.lvl, y.sf, y.pf FROM ('
            'SELECT n.id, (n.embedding::vector(%1$s) <=> $2::vector(%1$s))::float8 AS d, n.level AS lvl, '
            'n.source_file AS sf, n.parent_source_file AS pf FROM rag.hierarchical_content_nodes n '
            'WHERE n.embedding_model = %2$L AND n.embedding IS NOT NULL AND $1 = %2$L '
            'AND ($4::text IS NULL OR n.book = $4) AND ($5::int[] IS NULL OR n.level = ANY($5)) '
            'AND ($6::int[] IS NULL OR n.id = ANY($6)) '
            'ORDER BY n.embedding::vector(%1$s) <=> $2::vector(%1$s) LIMIT $3) y', p_dimension, p_model);
    ELSIF p_scan = 'sentences' THEN
        RETURN format(
            'SELECT st.cited_source_file, st.cited_paragraphs, (st.embedding <=> $2)::float8 '
            'FROM rag.sentences st WHERE st.embedding_model = %2$L AND $1 = %2$L AND ($4::text IS NULL OR st.book = $4) '
            'ORDER BY st.embedding::halfvec(%1$s) <=> $2::halfvec(%1$s) LIMIT $3', p_dimension, p_model);
    END IF;
    RAISE EXCEPTION 'unknown scan "%"', p_scan USING ERRCODE = 'invalid_parameter_value';
END
$$;
