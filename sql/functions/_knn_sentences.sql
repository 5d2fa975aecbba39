-- rag._knn_sentences: the summary sentences nearest to a vector; as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn_sentences(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL
) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], distance FLOAT8)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_n sentences of p_model nearest to p_vector (halfvec HNSW index), as the file and
paragraphs they cite and the full-precision distance. Replaced as rag._knn is.
Cost: one HNSW scan.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('sentences', p_model, v_dim) USING p_model, p_vector, p_n, p_book;
    END IF;
END
$$;
