-- rag._install_model_scans: write the corpus model's kNN scans as inlinable SQL functions (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_scans(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public
AS $$
/*
Writes rag._knn and rag._knn_sentences for p_model (rag._scan_sql's text as inlinable SQL
functions, so callers' static statements cache the index scan; no ranking in them), keeping
their identity and privileges; returns p_model. Run at each load (rag._ensure_vector_index) and
by `bookrag migrate`. A model with a $ keeps the stand-ins (NOTICE). Cost: milliseconds.
*/
BEGIN
    IF strpos(p_model, '$') > 0 THEN
        RAISE NOTICE 'model "%" has a $ in its name: its kNN scans stay planned per call', p_model;
        RETURN NULL;
    END IF;
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn(p_model TEXT, p_vector vector, p_n INT, p_book TEXT DEFAULT NULL, '
                   'p_levels INT[] DEFAULT NULL, p_ids INT[] DEFAULT NULL) RETURNS SETOF rag.candidate '
                   'LANGUAGE sql STABLE AS %L', rag._scan_sql('nodes', p_model, p_dimension));
    EXECUTE format('CREATE OR REPLACE '
                   'FUNCTION rag._knn_sentences(p_model TEXT, p_vector vector, p_n INT, '
                   'p_book TEXT DEFAULT NULL) RETURNS TABLE (cited_source_file TEXT, cited_paragraphs INT[], '
                   'distance FLOAT8) LANGUAGE sql STABLE AS %L', rag._scan_sql('sentences', p_model, p_dimension));
    RETURN p_model;
END
$$;
REVOKE EXECUTE ON FUNCTION rag._install_model_scans(TEXT, INT) FROM bookrag_reader;
