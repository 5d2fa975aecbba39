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
AS $$
/*
Returns the p_n rows of model p_model nearest to p_vector (cosine), as rag.candidate: s the
similarity, r 1..p_n; filters p_book, p_levels, p_ids as rag._bm25's. The scan is
rag._scan_sql('nodes', …). rag._install_model_scans replaces this body, at each load of
embedded rows and after migrations, with that scan as an inlinable SQL function for the corpus
model (its model and dimension as literals), so a caller's static statement caches its plan;
this version, which a migration installs, runs it through EXECUTE. No row for another model
than the corpus's. The caller sets ef_search (rag._set_hnsw).
Cost: one HNSW scan of the model's partial index.
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
