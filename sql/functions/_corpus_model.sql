-- The corpus embedding model and its dimension, checked against a query embedding.
CREATE OR REPLACE FUNCTION rag._corpus_model(
    p_query_embedding vector,
    OUT model TEXT,
    OUT dimension INT
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the single model registered in rag.embedding_models (model NULL when no vector was
ever loaded: the kNN branch is then empty). Raises invalid_parameter_value when
p_query_embedding's length differs from the model's dimension, or when several models are
registered (the loader keeps one; two models' vectors are never compared).
*/
DECLARE
    v_count INT;
BEGIN
    SELECT count(*) INTO v_count FROM rag.embedding_models;
    IF v_count > 1 THEN
        RAISE EXCEPTION 'several embedding models are registered (%); reload the corpus with one model',
            (SELECT string_agg(m.model, ', ') FROM rag.embedding_models m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m.model, m.dimension INTO model, dimension FROM rag.embedding_models m;
    IF model IS NOT NULL AND p_query_embedding IS NOT NULL AND vector_dims(p_query_embedding) <> dimension THEN
        RAISE EXCEPTION 'query embedding has % dimensions; the corpus model "%" has %',
            vector_dims(p_query_embedding), model, dimension
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
