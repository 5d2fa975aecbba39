-- rag._knn: the kNN branch's candidates (pgvector HNSW); as installed by this file, the stand-in that plans its scan per call.
CREATE OR REPLACE FUNCTION rag._knn(
    p_model  TEXT,
    p_vector vector,
    p_n      INT,
    p_book   TEXT DEFAULT NULL,
    p_levels INT[] DEFAULT NULL,
    p_ids    INT[] DEFAULT NULL
) RETURNS SETOF rag.candidate
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the p_n rows of p_model nearest to p_vector (rag.candidate: s the cosine similarity),
filtered by p_book, p_levels, p_ids. This file's version EXECUTEs rag._scan_sql('nodes', …);
rag._install_model_scans replaces it with that text as inlinable SQL for the corpus model.
The caller sets ef_search (rag._set_hnsw). Cost: one HNSW scan.
*/
DECLARE
    v_dim INT;
BEGIN
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL THEN
        RETURN QUERY EXECUTE rag._scan_sql('nodes', p_model, v_dim) USING p_model, p_vector, p_n, p_book, p_levels, p_ids;
    END IF;
END
$$;
