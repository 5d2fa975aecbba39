-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public
AS $$
/*
Registers (p_model, p_dimension) and creates, if missing, the partial HNSW cosine indexes of its
rows: chunks on embedding::vector(p_dimension) (hcn_hnsw_…), sentences on
embedding::halfvec(p_dimension) (sent_halfvec_…; a component beyond 65504 fails the build,
naming it); drops the former sent_hnsw_… index; writes the model's scans
(rag._install_model_scans). Returns the chunks' index name. Another dimension for a registered
model is an error. Cost: O(rows) to build (100k 384-d rows: 140 s), instant when they exist.
*/
DECLARE
    v_dim   INT;
    v_tag   TEXT := substr(md5(p_model), 1, 12);  -- the model's suffix in its index names
    v_index TEXT := 'hcn_hnsw_' || v_tag;
BEGIN
    IF p_model IS NULL OR p_dimension IS NULL OR p_dimension NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'model and a dimension within 1..2000 are required, got "%" and %', p_model, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.dimension INTO v_dim FROM rag.embedding_models m WHERE m.model = p_model;
    IF v_dim IS NOT NULL AND v_dim <> p_dimension THEN
        RAISE EXCEPTION 'model "%" is registered with dimension %, not %', p_model, v_dim, p_dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_dim IS NULL THEN
        INSERT INTO rag.embedding_models (model, dimension, index_name) VALUES (p_model, p_dimension, v_index);
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.hierarchical_content_nodes '
        'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
        v_index, p_dimension, p_model);
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON rag.sentences '
        'USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops) WHERE embedding_model = %L',
        'sent_halfvec_' || v_tag, p_dimension, p_model);
    -- the old index dropped after the build, so that searches (which the build's SHARE lock lets
    -- run) wait for the DROP's exclusive lock only from here to the commit
    IF to_regclass(format('rag.%I', 'sent_hnsw_' || v_tag)) IS NOT NULL THEN  -- (no notice when absent)
        EXECUTE format('DROP INDEX rag.%I', 'sent_hnsw_' || v_tag);
    END IF;
    PERFORM rag._install_model_scans(p_model, p_dimension);
    RETURN v_index;
END
$$;
