-- rag.build_context: search + parent expansion + deduplication within a token budget, ordered for reading.
CREATE OR REPLACE FUNCTION rag.build_context(
    p_query           TEXT,
    p_query_embedding vector,
    p_budget          INT DEFAULT 3000,
    p_k               INT DEFAULT 8,
    p_book            TEXT DEFAULT NULL,
    p_levels          INT[] DEFAULT NULL,
    p_expand          TEXT[] DEFAULT '{parent}',
    p_mode            TEXT DEFAULT 'auto',
    p_within          TEXT DEFAULT NULL,
    p_query_model     TEXT DEFAULT NULL,
    p_tuning          JSONB DEFAULT NULL
) RETURNS SETOF rag.context_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public
AS $$
/*
Returns the context an LLM reads: the p_k hits of rag.search (every argument of rag.search, by
the same name, default and meaning: p_query, p_query_embedding, p_mode, p_k, p_book, p_levels,
p_within, p_query_model, p_tuning; p_k defaults to 8 here) packed by rag.pack_context within
p_budget tokens (1..1,000,000, default 3000) with p_expand (default '{parent}': each hit's parent
node; NULL or '{}': the hits alone). It is rag.pack_context(ARRAY(SELECT id FROM rag.search(…)
ORDER BY rank), p_budget, p_expand).
Raises what rag.search and rag.pack_context raise. Cost: one search, two lookups per hit.
*/
BEGIN
    -- PL/pgSQL, not SQL: a SQL body is checked when created, and rag.search is created after it.
    RETURN QUERY
    SELECT * FROM rag.pack_context(
        ARRAY(SELECT h.id
              FROM rag.search(p_query, p_query_embedding, p_mode, p_k, p_book, p_levels, p_within,
                              NULL, p_query_model, p_tuning) h
              ORDER BY h.rank),
        p_budget, p_expand);
END
$$;
