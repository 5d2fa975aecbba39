-- rag._model_search_name: the name of a model's generated default search (rag._install_model_search).
CREATE OR REPLACE FUNCTION rag._model_search_name(
    p_model TEXT
) RETURNS TEXT
LANGUAGE sql IMMUTABLE
AS $$
/*
Returns '_default_search_' followed by the first 12 hex digits of md5(p_model) (NULL for a NULL
model): the function rag._install_model_search creates in schema rag, which rag._search_hits
calls and `bookrag migrate` regenerates. The one place this name is made.
Cost: one md5 of the name.
*/
    SELECT '_default_search_' || substr(md5(p_model), 1, 12);
$$;
