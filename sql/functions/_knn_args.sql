-- The checks and lookups every kNN search starts with (rag.search_branch's 'vector', rag.search_sentences).
CREATE OR REPLACE FUNCTION rag._knn_args(
    p_function        TEXT,
    p_query_embedding vector,
    p_k               INT,
    p_book            TEXT,
    p_levels          INT[],
    p_node_type       TEXT,
    p_within          TEXT,
    OUT model         TEXT,
    OUT dimension     INT,
    OUT within_ids    INT[]
)
LANGUAGE plpgsql STABLE
AS $$
/*
Returns the corpus model and its dimension (model NULL when no vector is loaded: the caller
returns no rows) and the ids of the p_within subtree (NULL = no restriction), after checking
the arguments: a NULL p_query_embedding is an error naming p_function; then
rag._check_search_args (k, book, levels, node_type), rag._subtree_ids (within) and
rag._corpus_model (the vector's length) raise invalid_parameter_value with their messages.
Cost: a few indexed lookups (the subtree walk when p_within is set).
*/
BEGIN
    IF p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'query embedding is NULL; % needs a vector (see `bookrag embed`)', p_function
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM rag._check_search_args(NULL, p_k, p_book, p_levels, p_node_type, false);
    within_ids := rag._subtree_ids(p_within, p_book);
    SELECT m.model, m.dimension INTO model, dimension FROM rag._corpus_model(p_query_embedding) m;
END
$$;
