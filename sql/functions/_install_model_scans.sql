-- rag._install_model_scans: write the corpus model's kNN scans as inlinable SQL functions (loader only).
CREATE OR REPLACE FUNCTION rag._install_model_scans(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Replaces the bodies of rag._knn and rag._knn_sentences (their files install stand-ins that
EXECUTE the scan) with p_model's scans, rag._scan_sql's text with the model and dimension as
literals, as SQL functions: the planner inlines them into the caller's static statement, whose
plan, index scan included, is then cached for the session. They hold no ranking: only the scan.
CREATE OR REPLACE keeps each function's identity and privileges. Returns p_model.
Called by rag._ensure_vector_index (each load of embedded rows) and by `bookrag migrate`
(after migrations, and when the installed scans are not this model's).
A model name with a $ (rag._scan_sql refuses it) keeps the stand-ins (NOTICE).
Cost: two function texts replaced (milliseconds).
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
