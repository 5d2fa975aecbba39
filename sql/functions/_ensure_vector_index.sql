-- Register an embedding model and create its partial HNSW index (loader only).
CREATE OR REPLACE FUNCTION rag._ensure_vector_index(
    p_model     TEXT,
    p_dimension INT
) RETURNS TEXT
LANGUAGE plpgsql VOLATILE
AS $$
/*
Registers (p_model, p_dimension) in rag.embedding_models and creates, if missing, the HNSW
cosine index on embedding::vector(p_dimension) restricted to rows WHERE embedding_model =
p_model: the exact expression and predicate rag._branch_sql uses, so the kNN branch can use it
whatever the model's dimension; and the same index on rag.sentences (named sent_hnsw_…), the
one rag.search_sentences scans; then (re)generates the model's default search
(rag._install_model_search), whose statements name the same expression. Returns the chunks' index name. A model already registered with
another dimension is an error. Cost: index creation is O(rows of the model) (100k 384-d rows in 140 s with the default
64MB maintenance_work_mem); instant when it exists.
*/
DECLARE
    v_dim   INT;
    v_index TEXT := 'hcn_hnsw_' || substr(md5(p_model), 1, 12);
    v_table TEXT;
    v_name  TEXT;
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
    FOR v_table, v_name IN VALUES ('hierarchical_content_nodes', v_index),
                                  ('sentences', 'sent_hnsw_' || substr(md5(p_model), 1, 12)) LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON rag.%I '
            'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE embedding_model = %L',
            v_name, v_table, p_dimension, p_model);
    END LOOP;
    PERFORM rag._install_model_search(p_model, p_dimension);
    RETURN v_index;
END
$$;
